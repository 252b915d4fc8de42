package dev.compute.boot.diagnostics;

import java.util.Map;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * The one shape of every bad-setting report, whichever analyzer found it: the property, the value it was given,
 * where that value came from, what is allowed, and what to change.
 */
final class SettingFailure {

    private SettingFailure() {}

    /** {@code origin} is empty when the environment cannot tell where the value was set. */
    static FailureAnalysis analysis(String property, String value, String origin, String allowed, Throwable cause) {
        return analysis(property, value, origin, allowed, Map.of(), cause);
    }

    /**
     * {@code related}: the other properties that what is allowed names, each with where it was set (empty: not set,
     * so its default).
     */
    static FailureAnalysis analysis(String property, String value, String origin, String allowed, Map<String, String> related,
            Throwable cause) {
        String nl = System.lineSeparator();
        StringBuilder description = new StringBuilder(property.startsWith("compute.") ? "A compute memory setting is invalid:" : "A setting is invalid:")
                .append(nl).append(nl)
                .append("    Property: ").append(property).append(nl)
                .append("    Value: \"").append(value).append('"').append(nl);
        if (!origin.isEmpty()) {
            description.append("    Origin: ").append(origin).append(nl);
        }
        description.append("    Allowed: ").append(allowed).append(nl);
        related.forEach((name, where) -> description.append("    Related: ").append(name).append(" (")
                .append(where.isEmpty() ? "not set: its default" : where).append(')').append(nl));
        String action = String.format("Change %s to %s%s, or remove it to use the default.", property, allowed,
                origin.isEmpty() ? " in your configuration (application.yml, application.properties or the environment)" : " where it is set (" + origin + ")");
        return new FailureAnalysis(description.toString(), action, cause);
    }
}
