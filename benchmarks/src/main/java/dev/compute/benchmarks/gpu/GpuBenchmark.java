package dev.compute.benchmarks.gpu;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

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
 * <p>Usage, on the GPU machine: {@code bash .gpu/run-main.sh dev.compute.benchmarks.gpu.GpuBenchmark [device]}, or
 * {@code java -jar benchmarks/target/compute-benchmarks.jar gpu [device]}.
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

    private GpuBenchmark() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** The {@code gpu} subcommand: 0 once the table is printed, 2 when there is no CUDA device to measure. */
    public static int run(String[] args) {
        int deviceIndex = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        RawCuda raw;
        try {
            raw = RawCuda.open(deviceIndex);
        } catch (NoCudaDeviceException e) {
            System.err.println("GpuBenchmark: " + e.getMessage());
            return 2;
        }
        UnifiedMemoryManager manager;
        try {
            manager = UnifiedMemoryManager.builder().backend("cuda").device(deviceIndex).build();
        } catch (RuntimeException e) {
            raw.close();
            System.err.println("GpuBenchmark: the CUDA backend did not open on device " + deviceIndex + ": " + e.getMessage());
            return 2;
        }
        try (raw; manager) {
            List<String> lines = new ArrayList<>();
            lines.add("GPU benchmark, " + ZonedDateTime.now().format(DateTimeFormatter.ISO_OFFSET_DATE_TIME));
            lines.add("device " + deviceIndex + ": " + raw.deviceName + ", driver API " + raw.driverVersion + ", host: "
                    + Runtime.getRuntime().availableProcessors() + " processors, Java " + Runtime.version());
            lines.addAll(pairTable(raw, manager));
            lines.add("");
            lines.addAll(copyTable(raw, manager));
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
        out.add(goal("pinned pool copy, H2D", poolPinnedIn / rawPinnedIn, PINNED_GOAL, "of raw pinned"));
        out.add(goal("pinned pool copy, D2H", poolPinnedOut / rawPinnedOut, PINNED_GOAL, "of raw pinned"));
        out.add(goal("byte[] through staging, H2D", stagedIn / rawPinnedIn, STAGING_GOAL, "of raw pinned"));
        out.add(goal("byte[] through staging, D2H", stagedOut / rawPinnedOut, STAGING_GOAL, "of raw pinned"));
        return out;
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
