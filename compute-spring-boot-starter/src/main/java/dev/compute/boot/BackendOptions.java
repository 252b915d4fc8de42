package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The backend options the starter itself knows ({@code compute.backend-options.*}): the OpenCL ones that
 * {@code compute.opencl.*} also sets, and how a backend's own name for an option becomes the property that sets it.
 * Which options a backend reads its provider says ({@code ComputeBackendProvider.options()}): the builder refuses
 * the others under a named backend and warns of them under {@code auto}.
 */
final class BackendOptions {

    static final String OPENCL_PLATFORM = "platform";
    static final String OPENCL_DEVICE_TYPE = "device-type";

    /** How a backend names one of its options in an {@link InvalidSettingException}: {@code page-size (an option of the cpu backend)}. */
    private static final Pattern BACKEND_NAMING = Pattern.compile("(\\S+) \\(an option of the \\S+ backend\\)");

    private BackendOptions() {}

    /** The property that sets backend option {@code key}. */
    static String property(String key) {
        return BackendSelection.OPTIONS + key;
    }

    /**
     * Whether backend {@code name} may read the OpenCL options: {@code auto}, a backend whose provider reads them or does
     * not say what it reads, or a name no provider has (which stops start-up on its own).
     */
    static boolean readsOpenClOptions(String name) {
        if (name.strip().equalsIgnoreCase(BackendSelection.AUTO)) {
            return true;
        }
        Set<String> read = BackendSelection.named(name, BackendSelection.providers()).map(ComputeBackendProvider::options).orElse(null);
        return read == null || read.contains(OPENCL_PLATFORM) || read.contains(OPENCL_DEVICE_TYPE);
    }

    /** The option a backend's {@link InvalidSettingException} names, as the property that sets it. */
    static Optional<String> asProperty(String backendsName) {
        Matcher matcher = BACKEND_NAMING.matcher(backendsName);
        return matcher.matches() ? Optional.of(property(matcher.group(1))) : Optional.empty();
    }
}
