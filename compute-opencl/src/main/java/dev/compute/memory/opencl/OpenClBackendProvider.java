package dev.compute.memory.opencl;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The {@code opencl} backend: between the CPU (priority 0) and CUDA (100), so {@code auto} takes CUDA on an
 * NVIDIA machine and OpenCL where CUDA is absent but an OpenCL device exists.
 *
 * <p>Options ({@link BackendSettings#options()}; in Spring {@code compute.opencl.*}):
 * <ul>
 *   <li>{@value #PLATFORM_OPTION}: a fragment of the platform's name, case-insensitive ({@code pocl},
 *       {@code nvidia}, {@code intel}); absent or blank for every platform.</li>
 *   <li>{@value #DEVICE_TYPE_OPTION}: {@code gpu}, {@code cpu}, {@code accelerator} or {@code all} (the default).</li>
 * </ul>
 * The device index ({@code compute.device}) counts among the devices that match both, GPUs first, then
 * accelerators, then CPUs, so index 0 is an accelerator wherever there is one.
 */
public final class OpenClBackendProvider implements ComputeBackendProvider {

    public static final String NAME = "opencl";
    public static final int PRIORITY = 50;
    /** Option key: a platform name fragment ({@code compute.opencl.platform}). */
    public static final String PLATFORM_OPTION = "platform";
    /** Option key: {@code gpu}, {@code cpu}, {@code accelerator} or {@code all} ({@code compute.opencl.device-type}). */
    public static final String DEVICE_TYPE_OPTION = "device-type";

    @Override
    public String name() {
        return NAME;
    }

    /** What {@link BackendSettings#options()} this backend reads (its README says what each does). */
    @Override
    public Set<String> options() {
        return Set.of(PLATFORM_OPTION, DEVICE_TYPE_OPTION);
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public BackendAvailability availability(BackendSettings settings) {
        OpenClDevices.Choice choice = OpenClDevices.choose(settings);
        return choice.device() != null ? BackendAvailability.available(choice.detail()) : BackendAvailability.unavailable(choice.detail());
    }

    /**
     * {@code auto} takes an OpenCL device only where it is not the processor itself: on a CPU device (PoCL) the
     * {@code cpu} backend does the same work without a driver in between. Naming {@code opencl}, or asking for
     * {@code device-type: cpu}, still takes it.
     */
    @Override
    public @Nullable String autoPassOverReason(BackendSettings settings) {
        OpenClDevice device = OpenClDevices.choose(settings).device();
        String askedType = settings.option(DEVICE_TYPE_OPTION);
        if (device == null || !"cpu".equals(device.typeName()) || "cpu".equalsIgnoreCase(askedType)) {
            return null;
        }
        return "the chosen device is a CPU: " + device.describe() + "; the cpu backend serves the processor directly"
                + " (set compute.backend=opencl to use OpenCL anyway)";
    }

    @Override
    public ComputeBackend create(BackendSettings settings) {
        OpenClDevices.Choice choice = OpenClDevices.choose(settings);
        OpenClDevice device = choice.device();
        if (device == null) {
            throw new BackendUnavailableException(NAME, choice.detail());
        }
        return new OpenClBackend(device, settings);
    }
}
