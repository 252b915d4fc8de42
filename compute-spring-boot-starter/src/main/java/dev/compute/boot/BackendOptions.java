package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The options each backend of this project reads ({@code compute.backend-options.*}; each backend's README says what
 * its options do). A backend ignores an option it does not know, so the starter checks them: under a backend named in
 * {@code compute.backend}, an option it does not read is a mistake (a typo, or an option of another backend) and stops
 * start-up; under {@code auto} it may be meant for a backend that was passed over, so the starter only warns. Options
 * of other providers' backends are passed on unchecked.
 */
final class BackendOptions {

    static final String OPENCL_PLATFORM = "platform";
    static final String OPENCL_DEVICE_TYPE = "device-type";

    private static final Map<String, List<String>> READ = Map.of(
            "cpu", List.of("page-size", "pinned-fallback"),
            "opencl", List.of(OPENCL_PLATFORM, OPENCL_DEVICE_TYPE),
            "cuda", List.of("streams", "staging-buffers", "staging-lanes", "copy-threads"));

    /** How a backend names one of its options in an {@link InvalidSettingException}: {@code page-size (an option of the cpu backend)}. */
    private static final Pattern BACKEND_NAMING = Pattern.compile("(\\S+) \\(an option of the \\S+ backend\\)");

    private BackendOptions() {}

    /** The property that sets backend option {@code key}. */
    static String property(String key) {
        return "compute.backend-options." + key;
    }

    /** Stops start-up for an option that {@code backend}, named explicitly and known here, does not read. */
    static void checkRead(String backend, Map<String, String> options) {
        List<String> read = READ.get(backend);
        if (read == null) {
            return;
        }
        options.forEach((key, value) -> {
            if (!read.contains(key)) {
                throw new InvalidSettingException(property(key), value, "an option the " + backend + " backend reads: "
                        + String.join(", ", read) + " (other backends' options only under compute.backend=auto)");
            }
        });
    }

    /** The options that {@code backend}, chosen by auto, does not read; empty for a backend not known here. */
    static List<String> unread(String backend, Map<String, String> options) {
        List<String> read = READ.get(backend);
        return read == null ? List.of() : options.keySet().stream().filter(key -> !read.contains(key)).toList();
    }

    /** What a backend reads, for messages. */
    static List<String> readBy(String backend) {
        return READ.getOrDefault(backend, List.of());
    }

    /** The option a backend's {@link InvalidSettingException} names, as the property that sets it. */
    static Optional<String> asProperty(String backendsName) {
        Matcher matcher = BACKEND_NAMING.matcher(backendsName);
        return matcher.matches() ? Optional.of(property(matcher.group(1))) : Optional.empty();
    }
}
