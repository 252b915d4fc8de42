package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.core.env.Environment;

/**
 * The managers named under {@code compute.managers}, in the order they are configured, and the primary one:
 * {@code compute.primary}, or the first. Each is a bean {@code <name>UnifiedMemoryManager}, qualified by its name.
 *
 * @param names the names, each of lower-case letters, digits and dashes
 * @param primary the name of the manager injected where one {@code UnifiedMemoryManager} is asked for
 */
record NamedManagers(List<String> names, String primary) {

    static final String PREFIX = "compute.managers";
    private static final ConfigurationPropertyName MANAGERS = ConfigurationPropertyName.of(PREFIX);

    // the name goes into bean names, URLs of the endpoint and meter tags: keep it plain
    private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9-]*");

    /**
     * The names under {@code compute.managers}, none where it is not set, in the order of the application's configuration:
     * its last property source first (application.yml comes after the environment and the command line), so that a
     * setting of one manager overridden from an earlier source (an environment variable) does not make it the first.
     */
    static List<String> namesIn(Environment environment) {
        Set<String> bound = Binder.get(environment).bind(PREFIX, Bindable.mapOf(String.class, Object.class))
                .map(Map::keySet).orElse(Set.of());
        List<IterableConfigurationPropertySource> sources = new ArrayList<>();
        ConfigurationPropertySources.get(environment).forEach(source -> {
            if (source instanceof IterableConfigurationPropertySource iterable) {
                sources.addFirst(iterable);
            }
        });
        Set<String> names = new LinkedHashSet<>();
        for (IterableConfigurationPropertySource source : sources) {
            source.stream().filter(MANAGERS::isAncestorOf).map(name -> name.getElement(MANAGERS.getNumberOfElements(), Form.ORIGINAL))
                    .filter(bound::contains).forEach(names::add);
        }
        names.addAll(bound); // any the sources do not list by name, in the binder's order
        return List.copyOf(names);
    }

    /**
     * The named managers (at least one is configured); fails, naming the property, for a name that is not plain (as
     * written: see {@link ConfiguredNames}) or a primary that is not one of them.
     */
    static NamedManagers of(Environment environment) {
        ConfiguredNames.check(environment, PREFIX, "a manager name");
        List<String> names = namesIn(environment);
        for (String name : names) {
            if (!NAME.matcher(name).matches()) {
                throw new InvalidSettingException(PREFIX + "." + name, name,
                        "a manager name of lower-case letters, digits and dashes, such as gpu or tenant-a");
            }
        }
        String primary = environment.getProperty("compute.primary");
        if (primary == null || primary.isBlank()) {
            return new NamedManagers(names, names.getFirst());
        }
        if (!names.contains(primary.trim())) {
            throw new InvalidSettingException("compute.primary", primary,
                    "the name of one of the managers under " + PREFIX + ": " + String.join(", ", names));
        }
        return new NamedManagers(names, primary.trim());
    }

    static String beanName(String name) {
        return name + ComputeMemoryAutoConfiguration.MANAGER_BEAN_NAME_SUFFIX;
    }
}
