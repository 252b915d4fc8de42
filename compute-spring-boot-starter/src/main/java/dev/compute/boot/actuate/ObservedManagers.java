package dev.compute.boot.actuate;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The managers that the endpoint, the health contributor and the meters observe: every {@link UnifiedMemoryManager}
 * bean, the starter's and the application's own, each under its name and with the one
 * {@link RecentMemoryStatistics} they all read. A manager's name is its bean name less the
 * {@value ComputeMemoryAutoConfiguration#MANAGER_BEAN_NAME_SUFFIX} suffix, as Spring Boot names a {@code DataSource} in its meters: {@code gpu} for
 * {@code gpuUnifiedMemoryManager} (the starter's {@code compute.managers.gpu}), {@code default} for
 * {@code unifiedMemoryManager} (the starter's one manager of {@code compute.*}), the bean name for any other.
 */
public final class ObservedManagers {

    private static final String BEAN_NAME_SUFFIX = ComputeMemoryAutoConfiguration.MANAGER_BEAN_NAME_SUFFIX;

    /**
     * @param name what the endpoint selects it by and the meters tag it with
     * @param primary whether it is the manager injected where one is asked for
     */
    public record ObservedManager(String name, UnifiedMemoryManager manager, RecentMemoryStatistics statistics, boolean primary) {}

    private final Map<String, ObservedManager> byName = new LinkedHashMap<>();

    /**
     * @param beans the managers by bean name, in the order to show them
     * @param primary the manager injected where one is asked for; {@code null} where there are several and none is primary
     */
    public ObservedManagers(Map<String, UnifiedMemoryManager> beans, @Nullable UnifiedMemoryManager primary) {
        this(beans, primary, RecentMemoryStatistics::new);
    }

    /** With statistics of another age or clock, for tests. */
    ObservedManagers(Map<String, UnifiedMemoryManager> beans, @Nullable UnifiedMemoryManager primary,
            Function<UnifiedMemoryManager, RecentMemoryStatistics> statistics) {
        Map<String, String> beanNames = new LinkedHashMap<>();
        beans.forEach((beanName, manager) -> {
            String name = nameOf(beanName);
            String other = beanNames.putIfAbsent(name, beanName);
            if (other != null) {
                throw new IllegalStateException("The UnifiedMemoryManager beans '" + other + "' and '" + beanName + "' are both observed as '"
                        + name + "' (a bean's name less '" + BEAN_NAME_SUFFIX + "'): rename one of them");
            }
            byName.put(name, new ObservedManager(name, manager, statistics.apply(manager), manager == primary));
        });
    }

    /** The name a manager bean is observed by. */
    public static String nameOf(String beanName) {
        if (!beanName.regionMatches(true, beanName.length() - BEAN_NAME_SUFFIX.length(), BEAN_NAME_SUFFIX, 0, BEAN_NAME_SUFFIX.length())) {
            return beanName;
        }
        String name = beanName.substring(0, beanName.length() - BEAN_NAME_SUFFIX.length());
        return name.isEmpty() ? ComputeMemoryAutoConfiguration.DEFAULT_MANAGER_NAME : name;
    }

    public Collection<ObservedManager> all() {
        return byName.values();
    }

    /** Every manager by its name, in the order of the beans. */
    public Map<String, ObservedManager> byName() {
        return byName;
    }

    public Optional<ObservedManager> get(String name) {
        return Optional.ofNullable(byName.get(name));
    }

    /** The manager injected where one is asked for: the only one, or the primary one. */
    public Optional<ObservedManager> primary() {
        return byName.values().stream().filter(ObservedManager::primary).findFirst();
    }
}
