package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.origin.Origin;
import org.springframework.boot.origin.OriginLookup;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.EnumerablePropertySource;
import org.springframework.core.env.Environment;
import org.springframework.core.env.PropertySource;
import org.springframework.core.env.SystemEnvironmentPropertySource;

/**
 * The names written as keys under a map of the configuration ({@code compute.budgets.<name>},
 * {@code compute.managers.<name>}), checked as they are written, before Spring's relaxed binding reads them. That
 * binding keeps only the letters, digits and dashes of a key not in brackets, and takes keys that differ only by
 * dashes or case for one: {@code a/b}, {@code a b}, {@code -a} or a name with a control character would silently be
 * made as {@code ab} or {@code a}, and {@code tenant-a} and {@code tenanta} would each get the other's settings.
 * Either stops start-up naming the key as it was written; so does a list written where the map is ({@code - limit: 1MB}),
 * whose index the binding would take for a name.
 */
final class ConfiguredNames {

    private ConfiguredNames() {}

    /** Checks the names of the managers under {@code compute.managers} and of the budgets of each and of {@code compute.budgets}. */
    static void checkAll(Environment environment) {
        check(environment, NamedManagers.PREFIX, "a manager name");
        check(environment, UnifiedMemoryManagerFactory.BUDGETS, "a budget name");
        for (String manager : NamedManagers.namesIn(environment)) {
            check(environment, NamedManagers.PREFIX + "." + manager + ".budgets", "a budget name");
        }
    }

    /**
     * Fails with an {@link InvalidSettingException} for a key directly under {@code prefix} that the binding would
     * rename, or that it would take for another one.
     *
     * @param what what a key names, for the message: "a budget name"
     */
    static void check(Environment environment, String prefix, String what) {
        if (!(environment instanceof ConfigurableEnvironment configurable)) {
            return;
        }
        ConfigurationPropertyName parent = ConfigurationPropertyName.of(prefix);
        int at = parent.getNumberOfElements();
        Map<String, String> byUniform = new LinkedHashMap<>();
        for (PropertySource<?> source : configurable.getPropertySources()) {
            // an environment variable cannot write such a name at all: Spring maps COMPUTE_BUDGETS_X_LIMIT its own way
            if (!(source instanceof EnumerablePropertySource<?> enumerable) || source instanceof SystemEnvironmentPropertySource) {
                continue;
            }
            for (String property : enumerable.getPropertyNames()) {
                List<String> elements = elementsOf(property);
                if (elements.size() <= at || !ConfigurationPropertyName.adapt(String.join(".", elements.subList(0, at)), '.').equals(parent)) {
                    continue;
                }
                String written = elements.get(at);
                boolean bracketed = written.length() > 1 && written.startsWith("[") && written.endsWith("]");
                String kept = bracketed ? written.substring(1, written.length() - 1) : keptOf(written);
                // a list where the map of names is expected (- limit: 1MB): the binding would take its index for a name
                if (bracketed && kept.chars().allMatch(c -> c >= '0' && c <= '9')) {
                    throw new InvalidSettingException(prefix + written, written, what + " of lower-case letters, digits and dashes, as a key of a map"
                            + " (the name, then its settings under it), not an element of a list, as written" + where(source, property));
                }
                if (!kept.equals(written) && !bracketed) {
                    throw new InvalidSettingException(prefix + "." + shown(written), shown(written), what + " of lower-case letters, digits and dashes,"
                            + " as written" + where(source, property) + ": Spring's binding would make it " + (kept.isEmpty() ? "no name at all" : "'" + kept + "'"));
                }
                String uniform = kept.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
                String other = byUniform.putIfAbsent(uniform, kept);
                if (other != null && !other.equals(kept)) {
                    throw new InvalidSettingException(prefix + "." + shown(kept), shown(kept), what + " that does not differ from "
                            + prefix + "." + shown(other) + " only by dashes or case: Spring's binding takes the two for one, so each would get the"
                            + " other's settings");
                }
            }
        }
    }

    // what the binding keeps of a key written without brackets
    private static String keptOf(String written) {
        ConfigurationPropertyName adapted = ConfigurationPropertyName.adapt(written, '.');
        return adapted.getNumberOfElements() == 1 ? adapted.getElement(0, Form.ORIGINAL) : "";
    }

    /** The elements of a property name as written: split at dots outside brackets, a bracketed element with its brackets. */
    private static List<String> elementsOf(String property) {
        List<String> elements = new ArrayList<>();
        StringBuilder element = new StringBuilder();
        boolean inBrackets = false;
        for (int i = 0; i < property.length(); i++) {
            char c = property.charAt(i);
            if (!inBrackets && (c == '.' || c == '[') && !element.isEmpty()) {
                elements.add(element.toString());
                element.setLength(0);
            }
            if (!inBrackets && c == '.') {
                continue;
            }
            inBrackets = c == '[' || (inBrackets && c != ']');
            element.append(c);
        }
        if (!element.isEmpty()) {
            elements.add(element.toString());
        }
        return elements;
    }

    private static String where(PropertySource<?> source, String property) {
        @SuppressWarnings("unchecked")
        Origin origin = source instanceof OriginLookup<?> lookup ? ((OriginLookup<String>) lookup).getOrigin(property) : null;
        return " (" + (origin != null ? origin : "property source \"" + source.getName() + "\"") + ")";
    }

    // a control character shown as an escape, so that the report says which one it is
    private static String shown(String name) {
        StringBuilder shown = new StringBuilder();
        name.chars().forEach(c -> shown.append(Character.isISOControl(c) ? String.format("\\u%04x", c) : String.valueOf((char) c)));
        return shown.toString();
    }
}
