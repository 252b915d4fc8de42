package dev.compute.memory.cpu;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.Locale;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The CPU backend's provider: named {@code cpu}, the lowest priority (0, so {@code auto} picks any accelerator
 * first), and available wherever the JVM runs on Linux on x86-64 or AArch64, with one device, index 0.
 */
public final class CpuBackendProvider implements ComputeBackendProvider {

    public static final String NAME = "cpu";

    private static final Set<String> ARCHITECTURES = Set.of("amd64", "x86_64", "aarch64");

    @Override
    public String name() {
        return NAME;
    }

    /** What {@link BackendSettings#options()} this backend reads (its README says what each does). */
    @Override
    public Set<String> options() {
        return Set.of(CpuBackendOptions.PAGE_SIZE, CpuBackendOptions.PINNED_FALLBACK);
    }

    @Override
    public int priority() {
        return 0;
    }

    @Override
    public BackendAvailability availability(BackendSettings settings) {
        String unsupported = unsupportedPlatform();
        if (unsupported != null) {
            return BackendAvailability.unavailable(unsupported);
        }
        if (settings.deviceIndex() != 0) {
            return BackendAvailability.unavailable("the CPU backend has one device, index 0; compute.device is " + settings.deviceIndex());
        }
        String missing = missingModule();
        if (missing != null) {
            return BackendAvailability.unavailable(missing);
        }
        DeviceMemoryInfo memory = LinuxHost.memory();
        return BackendAvailability.available(Runtime.getRuntime().availableProcessors() + " processors, "
                + mebibytes(memory.totalBytes()) + " memory (" + mebibytes(memory.freeBytes()) + " available)");
    }

    @Override
    public ComputeBackend create(BackendSettings settings) {
        BackendAvailability availability = availability(settings);
        if (!availability.available()) {
            throw new BackendUnavailableException(NAME, availability.detail());
        }
        return new CpuBackend(settings);
    }

    /** Why this platform is not supported, or null: checked before any native call, so nothing fails to link. */
    static @Nullable String unsupportedPlatform() {
        String os = System.getProperty("os.name", "");
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!os.toLowerCase(Locale.ROOT).startsWith("linux") || !ARCHITECTURES.contains(arch)) {
            return "the CPU backend calls Linux's mmap, mprotect and mlock (x86-64 and AArch64); this is " + os + " on " + arch;
        }
        return null;
    }

    /**
     * Why this runtime cannot run the backend, or null: it reads the machine's and the container's memory (the cgroup's
     * limit, as the JDK sees it) through {@code jdk.management}, which a trimmed runtime image ({@code jlink},
     * {@code --limit-modules}) may lack; without it the container's limit would go unseen, so the backend refuses to run.
     */
    static @Nullable String missingModule() {
        if (ModuleLayer.boot().findModule("jdk.management").isEmpty()) {
            return "the CPU backend reads the machine's and the container's memory through the jdk.management module, which this"
                    + " runtime lacks; add it to the runtime image (jlink --add-modules jdk.management)";
        }
        return null;
    }

    private static String mebibytes(long bytes) {
        return bytes < 0 ? "unknown" : (bytes >> 20) + " MiB";
    }
}
