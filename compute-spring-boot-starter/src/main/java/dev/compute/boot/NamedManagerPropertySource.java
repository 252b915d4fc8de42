package dev.compute.boot;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.core.env.Environment;

/**
 * One named manager's settings seen as {@code compute.*}: {@code compute.managers.<name>.x} where it is set, else
 * {@code compute.x}, so binding {@link ManagerProperties} at {@code compute} gives the manager's own values with
 * the rest inherited (a map such as {@code backend-options} key by key, a list whole). A named value wins over an inherited one
 * whichever property source either comes from. The properties keep their real names and origins, so a value that
 * does not convert is reported under the name it was set with, and {@link #whereSet} says the same for a value
 * the manager's builder refuses.
 */
final class NamedManagerPropertySource implements IterableConfigurationPropertySource {

    private static final ConfigurationPropertyName COMPUTE = ConfigurationPropertyName.of("compute");
    private static final ConfigurationPropertyName MANAGERS = ConfigurationPropertyName.of(NamedManagers.PREFIX);

    private final List<ConfigurationPropertySource> sources = new ArrayList<>();
    private final ConfigurationPropertyName own;

    NamedManagerPropertySource(Environment environment, String name) {
        ConfigurationPropertySources.get(environment).forEach(sources::add);
        this.own = MANAGERS.append(name);
    }

    @Override
    public @Nullable ConfigurationProperty getConfigurationProperty(ConfigurationPropertyName name) {
        if (!isManagerSetting(name)) {
            return null;
        }
        ConfigurationProperty named = find(under(own, name, 1));
        if (named != null) {
            return named;
        }
        ConfigurationPropertyName list = listOf(name);
        return list != null && isSet(under(own, list, 1)) ? null : find(name);
    }

    @Override
    public Stream<ConfigurationPropertyName> stream() {
        List<ConfigurationPropertyName> names = sources.stream().filter(IterableConfigurationPropertySource.class::isInstance)
                .flatMap(source -> ((IterableConfigurationPropertySource) source).stream()).toList();
        List<ConfigurationPropertyName> ownNames = names.stream().filter(own::isAncestorOf)
                .map(name -> under(COMPUTE, name, own.getNumberOfElements())).toList();
        return Stream.concat(ownNames.stream(), names.stream().filter(name -> !own.isAncestorOf(name)).filter(name -> {
                    ConfigurationPropertyName list = listOf(name);
                    return list == null || ownNames.stream().noneMatch(set -> set.equals(list) || list.isAncestorOf(set));
                }))
                .filter(NamedManagerPropertySource::isManagerSetting)
                .distinct();
    }

    /**
     * The list that {@code name} is an element of, or part of one ({@code compute.memory.pooling.warmup.host} for
     * {@code compute.memory.pooling.warmup.host[1].size}); {@code null} outside a list. A list is one setting, as in
     * Spring Boot, where a list from one source replaces another's whole: a manager that sets its own has none of the
     * inherited one's elements (its {@code host[0]} over an inherited {@code host[0]} and {@code host[1]} is one block,
     * not two).
     */
    private static @Nullable ConfigurationPropertyName listOf(ConfigurationPropertyName name) {
        for (int i = 0; i < name.getNumberOfElements(); i++) {
            if (name.isNumericIndex(i)) {
                return name.chop(i);
            }
        }
        return null;
    }

    /**
     * Where the {@code compute.*} setting the builder named is set for this manager: its own property, else the
     * inherited {@code compute.*} one; where neither is set (a default), its own, which is where to set it. A list or
     * a map counts as set where any of its elements is.
     */
    String whereSet(String property) {
        if (!ConfigurationPropertyName.isValid(property)) {
            return property;
        }
        ConfigurationPropertyName name = ConfigurationPropertyName.of(property);
        if (!isManagerSetting(name)) {
            return property;
        }
        ConfigurationPropertyName named = under(own, name, 1);
        return !isSet(named) && isSet(name) ? property : named.toString();
    }

    /**
     * {@code name} less its first {@code from} elements, under {@code prefix}. Not {@code prefix.append(name.subName(from))}:
     * in Spring Boot 4.1 a name made by appending a name fails when the binder cuts it again, as it does a list
     * element's ({@code memory.pooling.warmup.host[0].size}: an ArrayIndexOutOfBoundsException out of
     * {@code ConfigurationPropertyName.subName}), so a named manager's own warm-up could not be bound.
     */
    private static ConfigurationPropertyName under(ConfigurationPropertyName prefix, ConfigurationPropertyName name, int from) {
        return ConfigurationPropertyName.adapt(prefix + "." + name.subName(from), '.');
    }

    private @Nullable ConfigurationProperty find(ConfigurationPropertyName name) {
        for (ConfigurationPropertySource source : sources) {
            ConfigurationProperty property = source.getConfigurationProperty(name);
            if (property != null) {
                return property;
            }
        }
        return null;
    }

    // A list or a map (a warm-up's compute.memory.pooling.warmup.host) is set through its elements: host[0].size
    private boolean isSet(ConfigurationPropertyName name) {
        return find(name) != null || sources.stream().filter(IterableConfigurationPropertySource.class::isInstance)
                .flatMap(source -> ((IterableConfigurationPropertySource) source).stream()).anyMatch(name::isAncestorOf);
    }

    private static boolean isManagerSetting(ConfigurationPropertyName name) {
        return COMPUTE.isAncestorOf(name) && !MANAGERS.isAncestorOf(name) && !name.equals(MANAGERS);
    }
}
