package dev.compute.benchmarks.gpu;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.SplittableRandom;
import jcuda.Pointer;
import dev.compute.memory.cuda.CudaDeviceHandle;
import java.util.concurrent.CompletableFuture;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;

/**
 * The GPU benchmark of issue 6, one table: allocate+free pair latency for a pool hit, a pool miss, raw
 * {@code cuMemAlloc} and {@code cuMemAllocAsync} at 4 KiB, 1 MiB and 256 MiB; copy bandwidth both ways for
 * pinned pool buffers, for Java arrays through our staging and for raw JCuda from a pinned buffer and from a
 * {@code byte[]}. Every figure also as a ratio against the raw figure of the same run.
 *
 * <p>The pool figures go through the public API, {@code UnifiedMemoryManager.builder().backend("cuda")} with the
 * default settings, as a service would use it. A hit is an allocate+close of a size the pool has cached; a miss
 * is the same pair after {@code releaseCachedMemory()} (not timed) emptied the pool, so the pool goes to the
 * backend (pages mapped into an expandable segment, by default). Copies wait until the bytes have landed
 * ({@code cuCtxSynchronize} inside the timed region).
 *
 * <p>Usage, on the GPU machine: {@code bash .gpu/gpu-check.sh bench} (the bundle of {@code .ci/gpu-bundle}), or
 * {@code java -jar benchmarks/target/compute-benchmarks.jar gpu [device] [option=value...]}; each {@code option=value} is a
 * CUDA backend option ({@code copy-threads=8}), as {@code compute.cuda.*} properties set them.
 * Without a CUDA device it stops at once with exit status 2 and says why.
 */
public final class GpuBenchmark {

    static final long KIB = 1024;
    static final long MIB = 1024 * KIB;
    static final long[] PAIR_SIZES = {4 * KIB, MIB, 256 * MIB};
    static final long COPY_BYTES = 256 * MIB;
    static final double HIT_GOAL_NANOS = 100;
    static final double PINNED_GOAL = 0.95;
    static final double STAGING_GOAL = 0.70;
    static final double PINNED_HIT_GOAL_NANOS = 1000;
    static final int CHAIN_STEPS = 100;
    static final int CHAIN_FLOATS = 1 << 20;
    static final int BLOCK = 256;
    static final String OPS_PTX = "/dev/compute/memory/cuda/ops.ptx";

    private GpuBenchmark() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** The {@code gpu} subcommand: 0 once the table is printed, 2 when there is no CUDA device to measure. */
    public static int run(String[] args) {
        int deviceIndex = 0;
        int indexes = 0;
        Map<String, String> options = new LinkedHashMap<>();
        for (String arg : args) {
            int equals = arg.indexOf('=');
            if (equals > 0) {
                options.put(arg.substring(0, equals), arg.substring(equals + 1));
            } else {
                try {
                    deviceIndex = Integer.parseInt(arg);
                } catch (NumberFormatException e) {
                    deviceIndex = -1;
                }
                if (deviceIndex < 0 || ++indexes > 1) {
                    System.err.println("GpuBenchmark: not one device index of 0 or more: " + String.join(" ", args));
                    System.err.println("usage: gpu [DEVICE_INDEX] [backend-option=value...]");
                    return 2;
                }
            }
        }
        RawCuda raw;
        try {
            raw = RawCuda.open(deviceIndex);
        } catch (NoCudaDeviceException e) {
            System.err.println("GpuBenchmark: " + e.getMessage());
            return 2;
        }
        UnifiedMemoryManager manager;
        try {
            UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder().backend("cuda").device(deviceIndex);
            options.forEach(builder::backendOption);
            manager = builder.build();
        } catch (RuntimeException e) {
            raw.close();
            System.err.println("GpuBenchmark: the CUDA backend did not open on device " + deviceIndex + ": " + e.getMessage());
            return 2;
        }
        try (raw; manager) {
            List<String> lines = new ArrayList<>();
            lines.add("GPU benchmark, " + ZonedDateTime.now().format(DateTimeFormatter.ISO_OFFSET_DATE_TIME));
            lines.add("device " + deviceIndex + ": " + raw.deviceName + ", driver API " + raw.driverVersion + ", host: "
                    + Runtime.getRuntime().availableProcessors() + " processors, Java " + Runtime.version()
                    + (options.isEmpty() ? "" : ", backend options " + options));
            lines.addAll(pairTable(raw, manager));
            lines.add("");
            lines.addAll(pinnedPairTable(raw, manager));
            lines.add("");
            lines.addAll(copyTable(raw, manager));
            lines.add("");
            lines.addAll(chainTable(raw, manager));
            lines.forEach(System.out::println);
        }
        return 0;
    }

    // ---- allocate+free pairs --------------------------------------------------------------------------------------

    private static List<String> pairTable(RawCuda raw, UnifiedMemoryManager manager) {
        int n = PAIR_SIZES.length;
        double[] hit = new double[n];
        double[] miss = new double[n];
        double[] async = new double[n];
        double[] alloc = new double[n];
        for (int i = 0; i < n; i++) {
            long bytes = PAIR_SIZES[i];
            boolean huge = bytes >= 64 * MIB;
            manager.allocate(bytes, MemoryLocation.DEVICE).close();
            hit[i] = Timing.nanosPerCall(200_000, () -> manager.allocate(bytes, MemoryLocation.DEVICE).close(), () -> { });
            miss[i] = Timing.nanosPerCallEach(huge ? 10 : 200, manager::releaseCachedMemory,
                    () -> manager.allocate(bytes, MemoryLocation.DEVICE).close());
            manager.releaseCachedMemory();
            raw.makeCurrent();
            alloc[i] = Timing.nanosPerCall(huge ? 20 : 500, () -> raw.allocFreePair(bytes), () -> { });
            async[i] = Timing.nanosPerCall(10_000, () -> raw.asyncAllocFreePair(bytes), raw::synchronizeStream);
        }
        List<String> out = new ArrayList<>();
        out.add("allocate+free pair, microseconds (ratio: time / raw cuMemAlloc time of the same size; lower is better)");
        out.add(String.format(Locale.ROOT, "| %-34s | %-20s | %-20s | %-20s |", "pair", "4 KiB", "1 MiB", "256 MiB"));
        out.add("| " + "-".repeat(34) + " | " + "-".repeat(20) + " | " + "-".repeat(20) + " | " + "-".repeat(20) + " |");
        out.add(pairRow("pool hit (manager, DEVICE)", hit, alloc));
        out.add(pairRow("pool miss (manager, DEVICE)", miss, alloc));
        out.add(pairRow("cuMemAllocAsync + cuMemFreeAsync", async, alloc));
        out.add(pairRow("cuMemAlloc + cuMemFree (raw)", alloc, alloc));
        for (int i = 0; i < n; i++) {
            out.add(String.format(Locale.ROOT, "goal: pool hit at most %.0f ns at %s: %.0f ns, %s", HIT_GOAL_NANOS, sizeName(PAIR_SIZES[i]),
                    hit[i], hit[i] <= HIT_GOAL_NANOS ? "met" : "NOT met"));
        }
        return out;
    }

    private static List<String> pinnedPairTable(RawCuda raw, UnifiedMemoryManager manager) {
        int n = PAIR_SIZES.length;
        double[] hit = new double[n];
        double[] allocHost = new double[n];
        for (int i = 0; i < n; i++) {
            long bytes = PAIR_SIZES[i];
            boolean huge = bytes >= 64 * MIB;
            manager.allocate(bytes, MemoryLocation.PINNED).close();
            hit[i] = Timing.nanosPerCall(200_000, () -> manager.allocate(bytes, MemoryLocation.PINNED).close(), () -> { });
            manager.releaseCachedMemory();
            raw.makeCurrent();
            allocHost[i] = Timing.nanosPerCall(huge ? 3 : 50, () -> raw.pinnedAllocFreePair(bytes), () -> { });
        }
        List<String> out = new ArrayList<>();
        out.add("PINNED allocate+free pair, microseconds (ratio: time / raw cuMemAllocHost time of the same size; lower is better)");
        out.add(String.format(Locale.ROOT, "| %-34s | %-20s | %-20s | %-20s |", "pair", "4 KiB", "1 MiB", "256 MiB"));
        out.add("| " + "-".repeat(34) + " | " + "-".repeat(20) + " | " + "-".repeat(20) + " | " + "-".repeat(20) + " |");
        out.add(pairRow("pool hit (manager, PINNED)", hit, allocHost));
        out.add(pairRow("cuMemAllocHost + cuMemFreeHost (raw)", allocHost, allocHost));
        for (int i = 0; i < n; i++) {
            out.add(String.format(Locale.ROOT, "goal: PINNED pool hit at most %.0f ns at %s: %.0f ns, %s", PINNED_HIT_GOAL_NANOS,
                    sizeName(PAIR_SIZES[i]), hit[i], hit[i] <= PINNED_HIT_GOAL_NANOS ? "met" : "NOT met"));
        }
        return out;
    }

    private static String pairRow(String name, double[] nanos, double[] raw) {
        StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "| %-34s |", name));
        for (int i = 0; i < nanos.length; i++) {
            row.append(String.format(Locale.ROOT, " %-20s |", String.format(Locale.ROOT, "%.3f (%.4f)", nanos[i] / 1000, nanos[i] / raw[i])));
        }
        return row.toString();
    }

    private static String sizeName(long bytes) {
        return bytes >= MIB ? bytes / MIB + " MiB" : bytes / KIB + " KiB";
    }

    // ---- copies ---------------------------------------------------------------------------------------------------

    private static List<String> copyTable(RawCuda raw, UnifiedMemoryManager manager) {
        long bytes = COPY_BYTES;
        int copies = 4;
        byte[] array = new byte[(int) bytes];
        new SplittableRandom(1).nextBytes(array);

        raw.makeCurrent();
        CUdeviceptr rawDevice = raw.deviceAlloc(bytes);
        Pointer rawPinned = raw.pinnedAlloc(bytes);
        Pointer rawArray = Pointer.to(array);
        double rawPinnedIn;
        double rawPinnedOut;
        double rawArrayIn;
        double rawArrayOut;
        try {
            rawPinnedIn = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyToDevice(rawDevice, rawPinned, bytes));
            rawPinnedOut = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyToHost(rawPinned, rawDevice, bytes));
            rawArrayIn = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyToDevice(rawDevice, rawArray, bytes));
            rawArrayOut = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyToHost(rawArray, rawDevice, bytes));
        } finally {
            raw.pinnedFree(rawPinned);
            raw.deviceFree(rawDevice);
        }

        double poolPinnedIn;
        double poolPinnedOut;
        double stagedIn;
        double stagedOut;
        try (UnifiedBuffer device = manager.allocate(bytes, MemoryLocation.DEVICE);
             UnifiedBuffer pinned = manager.allocate(bytes, MemoryLocation.PINNED)) {
            pinned.copyFrom(array);
            poolPinnedIn = Timing.gigabytesPerSecond(bytes, copies, () -> {
                device.copyFrom(pinned, 0, 0, bytes);
                raw.synchronize();
            });
            poolPinnedOut = Timing.gigabytesPerSecond(bytes, copies, () -> {
                pinned.copyFrom(device, 0, 0, bytes);
                raw.synchronize();
            });
            stagedIn = Timing.gigabytesPerSecond(bytes, copies, () -> {
                device.copyFrom(array);
                raw.synchronize();
            });
            stagedOut = Timing.gigabytesPerSecond(bytes, copies, () -> {
                device.copyTo(array);
                raw.synchronize();
            });
        }

        // which side costs the pool's pinned copy its few percent: the same raw cuMemcpy with one end in the pool's memory
        double poolPinnedToRawDevice;
        double rawPinnedToPoolDevice;
        double asyncStreamWait;
        double asyncEventWait;
        raw.makeCurrent();
        CUdeviceptr plainDevice = raw.deviceAlloc(bytes);
        Pointer plainPinned = raw.pinnedAlloc(bytes);
        try (UnifiedBuffer device = manager.allocate(bytes, MemoryLocation.DEVICE);
             UnifiedBuffer pinned = manager.allocate(bytes, MemoryLocation.PINNED);
             BufferAccess deviceAccess = device.deviceAccess(AccessMode.WRITE);
             BufferAccess pinnedAccess = pinned.deviceAccess(AccessMode.READ)) {
            CUdeviceptr poolDevice = deviceAccess.handle(CudaDeviceHandle.class).pointer();
            CUdeviceptr poolPinned = pinnedAccess.handle(CudaDeviceHandle.class).pointer();
            CUdeviceptr plainPinnedOnDevice = raw.devicePointerOf(plainPinned);
            raw.makeCurrent();
            poolPinnedToRawDevice = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copy(plainDevice, poolPinned, bytes));
            rawPinnedToPoolDevice = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copy(poolDevice, plainPinnedOnDevice, bytes));
            asyncStreamWait = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyAsyncAndWait(plainDevice, plainPinnedOnDevice, bytes, false));
            asyncEventWait = Timing.gigabytesPerSecond(bytes, copies, () -> raw.copyAsyncAndWait(plainDevice, plainPinnedOnDevice, bytes, true));
        } finally {
            raw.makeCurrent();
            raw.pinnedFree(plainPinned);
            raw.deviceFree(plainDevice);
        }

        List<String> out = new ArrayList<>();
        out.add("copies of " + sizeName(bytes) + ", GB/s (10^9 bytes/s); ratios against the raw pinned copy and the raw byte[] copy of the same run");
        out.add(String.format(Locale.ROOT, "| %-44s | %-10s | %-12s | %-12s | %-10s | %-12s | %-12s |",
                "copy", "H2D GB/s", "/ raw pinned", "/ raw byte[]", "D2H GB/s", "/ raw pinned", "/ raw byte[]"));
        out.add("| " + "-".repeat(44) + " | " + "-".repeat(10) + " | " + "-".repeat(12) + " | " + "-".repeat(12) + " | "
                + "-".repeat(10) + " | " + "-".repeat(12) + " | " + "-".repeat(12) + " |");
        double[] pinnedBase = {rawPinnedIn, rawPinnedOut};
        double[] arrayBase = {rawArrayIn, rawArrayOut};
        out.add(copyRow("pinned pool buffer <-> DEVICE buffer", new double[] {poolPinnedIn, poolPinnedOut}, pinnedBase, arrayBase));
        out.add(copyRow("byte[] <-> DEVICE buffer (our staging)", new double[] {stagedIn, stagedOut}, pinnedBase, arrayBase));
        out.add(copyRow("raw JCuda, cuMemAllocHost buffer (pinned)", pinnedBase, pinnedBase, arrayBase));
        out.add(copyRow("raw JCuda, byte[] (Pointer.to)", arrayBase, pinnedBase, arrayBase));
        out.add(String.format(Locale.ROOT, "where the pinned gap is: raw cuMemcpy H2D from the pool's PINNED buffer to cuMemAlloc memory %.2f GB/s (%.3f of raw"
                + " pinned); from cuMemAllocHost memory to the pool's DEVICE buffer %.2f GB/s (%.3f)", poolPinnedToRawDevice,
                poolPinnedToRawDevice / rawPinnedIn, rawPinnedToPoolDevice, rawPinnedToPoolDevice / rawPinnedIn));
        out.add(String.format(Locale.ROOT, "and the backend's way between raw buffers: cuMemcpyAsync on a non-blocking stream, then cuStreamSynchronize %.2f GB/s"
                + " (%.3f), or a blocking-sync event's cuEventSynchronize %.2f GB/s (%.3f)", asyncStreamWait, asyncStreamWait / rawPinnedIn,
                asyncEventWait, asyncEventWait / rawPinnedIn));
        out.add(goal("pinned pool copy, H2D", poolPinnedIn / rawPinnedIn, PINNED_GOAL, "of raw pinned"));
        out.add(goal("pinned pool copy, D2H", poolPinnedOut / rawPinnedOut, PINNED_GOAL, "of raw pinned"));
        out.add(goal("byte[] through staging, H2D", stagedIn / rawPinnedIn, STAGING_GOAL, "of raw pinned"));
        out.add(goal("byte[] through staging, D2H", stagedOut / rawPinnedOut, STAGING_GOAL, "of raw pinned"));
        return out;
    }

    // ---- a chain of kernels and ops ---------------------------------------------------------------------------------

    /**
     * {@value #CHAIN_STEPS} steps on one DEVICE buffer of {@value #CHAIN_FLOATS} floats, each a kernel launched through
     * JCuda as a user launches their own (here the backend's own {@code scale_f32} PTX, loaded separately) on a device
     * access, then an op ({@code ops().scaleAsync}); against the same launches on a raw stream. Both end with one wait.
     */
    private static List<String> chainTable(RawCuda raw, UnifiedMemoryManager manager) {
        CUmodule module = raw.loadModule(OPS_PTX);
        try {
            CUfunction scale = raw.function(module, "scale_f32");
            long n = CHAIN_FLOATS;
            int blocks = (int) Math.ceilDiv(n, BLOCK);
            double rawNanos;
            CUdeviceptr plain = raw.deviceAlloc(n * Float.BYTES);
            try {
                rawNanos = Timing.nanosPerCall(20, () -> {
                    for (int step = 0; step < CHAIN_STEPS; step++) {
                        RawCuda.launch(scale, blocks, BLOCK, raw.stream(), scaleArguments(plain, n, 1.0001f));
                        RawCuda.launch(scale, blocks, BLOCK, raw.stream(), scaleArguments(plain, n, 0.9999f));
                    }
                    raw.synchronizeStream();
                }, () -> { });
            } finally {
                raw.deviceFree(plain);
            }
            double accessNanos;
            try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
                manager.ops().fill(buffer, 1);
                accessNanos = Timing.nanosPerCall(20, () -> {
                    CompletableFuture<Void> last = null;
                    for (int step = 0; step < CHAIN_STEPS; step++) {
                        try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                            CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                            RawCuda.launch(scale, blocks, BLOCK, cuda.stream(), scaleArguments(cuda.pointer(), n, 1.0001f));
                        }
                        last = manager.ops().scaleAsync(buffer, 0.9999);
                    }
                    last.join();
                }, () -> { });
            }
            List<String> out = new ArrayList<>();
            out.add("a chain of " + CHAIN_STEPS + " kernels and " + CHAIN_STEPS + " ops on " + CHAIN_FLOATS + " floats, then one wait, microseconds");
            out.add(String.format(Locale.ROOT, "| %-44s | %12s | %10s |", "chain", "us", "/ raw"));
            out.add("| " + "-".repeat(44) + " | " + "-".repeat(12) + " | " + "-".repeat(10) + " |");
            out.add(String.format(Locale.ROOT, "| %-44s | %12.1f | %10.3f |", "device accesses + ops (manager)", accessNanos / 1000, accessNanos / rawNanos));
            out.add(String.format(Locale.ROOT, "| %-44s | %12.1f | %10.3f |", "raw launches on one stream", rawNanos / 1000, 1.0));
            return out;
        } finally {
            raw.unload(module);
        }
    }

    private static Pointer scaleArguments(CUdeviceptr x, long n, float alpha) {
        return Pointer.to(Pointer.to(x), Pointer.to(new long[] {n}), Pointer.to(new float[] {alpha}));
    }

    private static String copyRow(String name, double[] rates, double[] pinnedBase, double[] arrayBase) {
        return String.format(Locale.ROOT, "| %-44s | %10.2f | %12.3f | %12.3f | %10.2f | %12.3f | %12.3f |", name,
                rates[0], rates[0] / pinnedBase[0], rates[0] / arrayBase[0], rates[1], rates[1] / pinnedBase[1], rates[1] / arrayBase[1]);
    }

    private static String goal(String what, double ratio, double goal, String of) {
        return String.format(Locale.ROOT, "goal: %s at least %.0f%% %s: %.1f%%, %s", what, goal * 100, of, ratio * 100,
                ratio >= goal ? "met" : "NOT met");
    }
}
