package dev.compute.memory.contract;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.JavaKernel;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * One's own kernels ({@code manager.kernels()}), on every backend: the same three kernels written in OpenCL C, PTX
 * ({@code src/test/cuda/kernel-contract.cu}) and Java, compiled by passing all three, so each backend takes the one
 * it runs. Launched with buffers, slices at aligned and unaligned offsets and scalars of each type, in one and two
 * dimensions, from many threads at once; the modes' effect on which copy is newer; one compile per manager; and the
 * messages of wrong arguments.
 */
public abstract class KernelContractTest {

    /** The kernels in OpenCL C; {@code double} needs cl_khr_fp64 (PoCL has it). */
    public static final String OPENCL_C = """
            #pragma OPENCL EXTENSION cl_khr_fp64 : enable
            __kernel void affine(__global const float *x, __global float *y, long n, float a, double b, int c) {
                long i = get_global_id(0);
                if (i < n) {
                    y[i] = x[i] * a + (float) b + (float) c;
                }
            }
            __kernel void scale_in_place(__global float *x, long n, float a) {
                long i = get_global_id(0);
                if (i < n) {
                    x[i] = x[i] * a;
                }
            }
            __kernel void iota2d(__global int *out, int width, int height) {
                int x = get_global_id(0);
                int y = get_global_id(1);
                if (x < width && y < height) {
                    out[y * width + x] = y * 1000 + x;
                }
            }
            """;

    /** The kernels as PTX, made by nvcc from {@code src/test/cuda/kernel-contract.cu}. */
    public static final String PTX = resource("/dev/compute/memory/contract/kernel-contract.ptx");

    /** The kernels in Java: one object each, so that equal sources are one kernel. */
    public static final JavaKernel AFFINE = (shape, args) -> {
        MemorySegment x = args.segment(0);
        MemorySegment y = args.segment(1);
        long n = args.longValue(2);
        float a = args.floatValue(3);
        double b = args.doubleValue(4);
        int c = args.intValue(5);
        for (long i = 0; i < n; i++) {
            y.setAtIndex(JAVA_FLOAT, i, x.getAtIndex(JAVA_FLOAT, i) * a + (float) b + (float) c);
        }
    };
    public static final JavaKernel SCALE_IN_PLACE = (shape, args) -> {
        MemorySegment x = args.segment(0);
        float a = args.floatValue(2);
        for (long i = 0; i < args.longValue(1); i++) {
            x.setAtIndex(JAVA_FLOAT, i, x.getAtIndex(JAVA_FLOAT, i) * a);
        }
    };
    public static final JavaKernel IOTA_2D = (shape, args) -> {
        MemorySegment out = args.segment(0);
        int width = args.intValue(1);
        int height = args.intValue(2);
        for (int y = 0; y < height; y++) {
            for (int x = 0; x < width; x++) {
                out.setAtIndex(JAVA_INT, (long) y * width + x, y * 1000 + x);
            }
        }
    };

    public static KernelSource[] sources(String name, JavaKernel java) {
        return new KernelSource[] {KernelSource.openCl(OPENCL_C, name), KernelSource.ptx(PTX, name), KernelSource.java(name, java)};
    }

    protected UnifiedMemoryManager manager;
    private final List<UnifiedMemoryManager> others = new ArrayList<>();

    /** A fresh manager on the backend under test. */
    protected abstract UnifiedMemoryManager newManager();

    /** The locations whose memory the backend's kernels reach. */
    protected Set<MemoryLocation> kernelLocations() {
        return Set.copyOf(manager.locations());
    }

    @BeforeEach
    void openManager() {
        manager = newManager();
    }

    @AfterEach
    void closeManagers() {
        others.forEach(UnifiedMemoryManager::close);
        if (manager != null) {
            manager.close();
        }
    }

    protected ComputeKernel affine() {
        return compile(manager, "affine", AFFINE);
    }

    protected static ComputeKernel compile(UnifiedMemoryManager on, String name, JavaKernel java) {
        KernelSource[] all = sources(name, java);
        return on.kernels().compile(all[0], all[1], all[2]);
    }

    @Test
    void aKernelRunsOnBuffersAndScalarsAtEveryLocationItReaches() throws Exception {
        ComputeKernel affine = affine();
        int n = 1000; // not a multiple of any work-group: the kernel's guard meets the rounded-up work items
        float[] xs = ramp(n);
        for (MemoryLocation location : manager.locations()) {
            if (!kernelLocations().contains(location)) {
                continue;
            }
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n, location);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, n + 7, location)) {
                x.copyFrom(xs);
                y.copyFrom(filled(n + 7, -9f));
                CompletableFuture<Void> done = affine.launch(LaunchShape.of(n), KernelArg.read(x), KernelArg.write(y), (long) n, 0.5f, 3.0, -1);
                assertThat(done).as("%s", location).succeedsWithin(Duration.ofSeconds(30));
                float[] result = new float[n + 7];
                y.copyTo(result);
                for (int i = 0; i < n; i++) {
                    assertThat(result[i]).as("%s: y[%d]", location, i).isEqualTo(xs[i] * 0.5f + 3f - 1f);
                }
                for (int i = n; i < n + 7; i++) {
                    assertThat(result[i]).as("%s: y[%d] lies past n and is untouched", location, i).isEqualTo(-9f);
                }
                float[] unchanged = new float[n];
                x.copyTo(unchanged);
                assertThat(unchanged).as("%s: the read argument", location).containsExactly(xs);
            }
        }
    }

    @Test
    void aReadArgumentIsNotMarkedNewerAndAWrittenOneIs() {
        ComputeKernel affine = affine();
        ComputeKernel scale = compile(manager, "scale_in_place", SCALE_IN_PLACE);
        int n = 300;
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, n)) {
            x.copyFrom(ramp(n));
            y.copyFrom(filled(n, 0f));
            x.readOnlyHostView(); // a host mirror, brought up to date: both copies equal
            y.readOnlyHostView();
            BufferState before = x.state();
            assertThat(before.deviceIsNewer()).isFalse();

            affine.launch(LaunchShape.of(n), KernelArg.read(x), KernelArg.write(y), (long) n, 2f, 0.0, 0).join();
            assertThat(x.state()).as("a READ argument stays as it was").isEqualTo(before);
            if (!y.isHostAccessible()) {
                assertThat(y.state().deviceIsNewer()).as("a WRITE argument's device copy is the newer one").isTrue();
            }
            scale.launch(LaunchShape.of(n), x, (long) n, 3f).join(); // a buffer alone: READ_WRITE
            if (!x.isHostAccessible()) {
                assertThat(x.state().deviceIsNewer()).as("a buffer passed alone is written").isTrue();
            }
            float[] result = new float[n];
            x.copyTo(result); // no sync of one's own: the device copy comes over
            for (int i = 0; i < n; i++) {
                assertThat(result[i]).isEqualTo(ramp(n)[i] * 3f);
            }
        }
    }

    /**
     * A writing host access's end marks the host copy newer: device work writing the buffer while it is open would be
     * overwritten by the next sync (a kernel's result read back as the host's old bytes), so it is refused, on every
     * backend alike; a device read is not, and once the host access ends the same work runs on what the host wrote.
     */
    @Test
    void deviceWorkThatWritesABufferIsRefusedWhileAWritingHostAccessToItIsOpenAndNothingIsLost() {
        ComputeKernel scale = compile(manager, "scale_in_place", SCALE_IN_PLACE);
        int n = 300;
        float[] xs = ramp(n);
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n)) {
            x.copyFrom(xs);
            try (BufferAccess host = x.hostAccess(AccessMode.READ_WRITE)) {
                host.segment().setAtIndex(JAVA_FLOAT, 0, 100f);
                String named = "while a READ_WRITE host access to it is open (on thread '" + Thread.currentThread().getName() + "')";
                assertThatThrownBy(() -> scale.launch(LaunchShape.of(n), x, (long) n, 3f)).isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining(named).hasMessageEndingWith("end the host access first");
                assertThatThrownBy(() -> manager.ops().scale(x, 3)).isInstanceOf(IllegalStateException.class).hasMessageContaining(named);
                assertThatThrownBy(() -> x.deviceAccess(AccessMode.WRITE)).isInstanceOf(IllegalStateException.class)
                        .hasMessageStartingWith("a WRITE device access to " + x).hasMessageContaining(named);
                try (BufferAccess read = x.deviceAccess(AccessMode.READ)) {
                    assertThat(read.isOpen()).as("a device read is no write the host copy would overwrite").isTrue();
                }
                assertThat(host.segment().getAtIndex(JAVA_FLOAT, 1)).as("the refusals changed nothing").isEqualTo(xs[1]);
            }
            scale.launch(LaunchShape.of(n), x, (long) n, 3f).join();
            float[] result = new float[n];
            x.copyTo(result);
            assertThat(result[0]).as("the host's write, then the kernel's").isEqualTo(300f);
            for (int i = 1; i < n; i++) {
                assertThat(result[i]).as("x[%d]", i).isEqualTo(xs[i] * 3f);
            }
            try (BufferAccess read = x.hostAccess(AccessMode.READ)) {
                manager.ops().scale(x, 0.5); // a reading host access leaves the device's copy newer: nothing to overwrite
            }
            x.copyTo(result);
            assertThat(result[1]).isEqualTo(xs[1] * 1.5f);
        }
    }

    @Test
    void slicesAtAnyOffsetAreTheirOwnFirstElement() {
        ComputeKernel affine = affine();
        ComputeKernel scale = compile(manager, "scale_in_place", SCALE_IN_PLACE);
        int n = 4096;
        float[] xs = ramp(n);
        // 128 floats are 512 bytes (a sub-buffer's origin on OpenCL); 3 floats are 12 bytes, an offset no sub-buffer has
        for (int offset : new int[] {128, 3}) {
            for (MemoryLocation location : kernelLocations()) {
                try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n, location);
                     UnifiedBuffer y = manager.allocate(DataType.FLOAT32, n, location)) {
                    x.copyFrom(xs);
                    y.copyFrom(filled(n, -9f));
                    int count = 1001;
                    try (UnifiedBuffer xSlice = x.slice(offset + 5, count); UnifiedBuffer ySlice = y.slice(offset, count)) {
                        affine.launch(LaunchShape.of(count), KernelArg.read(xSlice), KernelArg.write(ySlice), (long) count, 1f, 0.0, 0).join();
                        scale.launch(LaunchShape.of(count - 1), ySlice.slice(1, count - 1), (long) (count - 1), 2f).join();
                    }
                    float[] result = new float[n];
                    y.copyTo(result);
                    for (int i = 0; i < n; i++) {
                        int inSlice = i - offset;
                        float expected = inSlice < 0 || inSlice >= count ? -9f : inSlice == 0 ? xs[offset + 5] : 2f * xs[offset + 5 + inSlice];
                        assertThat(result[i]).as("%s, slice at %d: y[%d]", location, offset, i).isEqualTo(expected);
                    }
                    float[] source = new float[n];
                    x.copyTo(source);
                    assertThat(source).as("%s: the sliced read argument", location).containsExactly(xs);
                }
            }
        }
    }

    @Test
    void twoDimensionalShapesRoundUpAndTheKernelGuardsItsIndex() {
        ComputeKernel iota = compile(manager, "iota2d", IOTA_2D);
        int width = 37;
        int height = 19;
        for (LaunchShape shape : List.of(LaunchShape.of(width, height), LaunchShape.of(width, height).withWorkGroup(8, 4))) {
            try (UnifiedBuffer out = manager.allocate(DataType.INT32, (long) width * height + 1)) {
                out.copyFrom(new int[width * height + 1]);
                iota.launch(shape, out, width, height).join();
                int[] result = new int[width * height + 1];
                out.copyTo(result);
                for (int y = 0; y < height; y++) {
                    for (int x = 0; x < width; x++) {
                        assertThat(result[y * width + x]).as("%s: (%d, %d)", shape, x, y).isEqualTo(y * 1000 + x);
                    }
                }
                assertThat(result[width * height]).as("the element past the grid").isZero();
            }
        }
    }

    @Test
    void manyThreadsLaunchOneKernelAtOnce() throws Exception {
        ComputeKernel affine = affine();
        int threads = 8;
        int launches = 25;
        int n = 777;
        CyclicBarrier start = new CyclicBarrier(threads);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try (UnifiedBuffer shared = manager.allocate(DataType.FLOAT32, n)) {
            float[] xs = ramp(n);
            shared.copyFrom(xs);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                done.add(pool.submit(() -> {
                    start.await();
                    try (UnifiedBuffer y = manager.allocate(DataType.FLOAT32, n)) {
                        for (int launch = 0; launch < launches; launch++) {
                            float a = thread + (launch % 8) * 0.25f; // exact in float: fused or not, one result
                            affine.launch(LaunchShape.of(n), KernelArg.read(shared), KernelArg.write(y), (long) n, a, (double) launch, thread);
                            float[] result = new float[n];
                            y.copyTo(result); // waits for the kernel: it is in flight on y
                            for (int i = 0; i < n; i++) {
                                if (result[i] != xs[i] * a + (float) launch + (float) thread) {
                                    throw new AssertionError("thread " + thread + ", launch " + launch + ": y[" + i + "] = " + result[i]);
                                }
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> future : done) {
                future.get(2, TimeUnit.MINUTES);
            }
            float[] after = new float[n];
            shared.copyTo(after);
            assertThat(after).containsExactly(xs);
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void eachSourceCompilesOncePerManager() throws Exception {
        ComputeKernel first = affine();
        assertThat(affine()).as("equal sources, given again").isSameAs(first);
        KernelSource chosen = first.source();
        assertThat(manager.kernels().languages()).contains(chosen.language());
        assertThat(manager.kernels().compile(chosen)).as("the chosen source alone").isSameAs(first);
        assertThat(first.name()).isEqualTo("affine");

        List<CompletableFuture<ComputeKernel>> racing = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            CyclicBarrier start = new CyclicBarrier(4);
            for (int t = 0; t < 4; t++) {
                racing.add(CompletableFuture.supplyAsync(() -> {
                    try {
                        start.await();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                    return compile(manager, "scale_in_place", SCALE_IN_PLACE);
                }, pool));
            }
            ComputeKernel scale = racing.getFirst().get(1, TimeUnit.MINUTES);
            for (CompletableFuture<ComputeKernel> other : racing) {
                assertThat(other.get(1, TimeUnit.MINUTES)).as("threads compiling one source at once get one kernel").isSameAs(scale);
            }
        } finally {
            pool.shutdownNow();
        }

        UnifiedMemoryManager second = newManager();
        others.add(second);
        ComputeKernel theirs = compile(second, "affine", AFFINE);
        assertThat(theirs).as("another manager compiles its own").isNotSameAs(first);
        try (UnifiedBuffer x = second.allocate(DataType.FLOAT32, 4); UnifiedBuffer y = second.allocate(DataType.FLOAT32, 4)) {
            x.copyFrom(new float[] {1, 2, 3, 4});
            theirs.launch(LaunchShape.of(4), KernelArg.read(x), KernelArg.write(y), 4L, 1f, 1.0, 1).join();
            float[] result = new float[4];
            y.copyTo(result);
            assertThat(result).containsExactly(3, 4, 5, 6);
        }
    }

    @Test
    void wrongArgumentsFailNamingTheKernelAndTheArgument() {
        ComputeKernel affine = affine();
        UnifiedMemoryManager other = newManager();
        others.add(other);
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 8);
             UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 8);
             UnifiedBuffer foreign = other.allocate(DataType.FLOAT32, 8)) {
            x.copyFrom(new float[8]);
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), x, y, 8L, 1f, 1.0, "one"))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel 'affine'").hasMessageContaining("argument 5").hasMessageContaining("java.lang.String");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), x, null, 8L, 1f, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kernel 'affine'").hasMessageContaining("argument 1 is null");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), x, foreign, 8L, 1f, 1.0, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1").hasMessageContaining("another UnifiedMemoryManager");
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), x, y, 8L, 1f, 1.0, (short) 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("widen it to an Integer");

            // the kernel's own parameters: a Double where it takes a float, too few arguments
            assertThat(failureOf(() -> affine.launch(LaunchShape.of(8), x, y, 8L, 1.0, 1.0, 1)))
                    .hasMessageContaining("affine").hasMessageContaining("argument 3").hasMessageContaining("Float");
            assertThat(failureOf(() -> affine.launch(LaunchShape.of(8), x, y, 8L, 1f, 1.0)))
                    .hasMessageContaining("affine").hasMessageContaining("argument");

            UnifiedBuffer closed = manager.allocate(DataType.FLOAT32, 8);
            closed.close();
            assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), x, closed, 8L, 1f, 1.0, 1))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("kernel 'affine', argument 1").hasMessageContaining("closed");

            // nothing was left held by the refused launches: y takes an access of its own, and x its results
            affine.launch(LaunchShape.of(8), KernelArg.read(x), KernelArg.write(y), 8L, 0f, 2.0, 0).join();
            float[] result = new float[8];
            y.copyTo(result);
            assertThat(result).containsOnly(2f);
        }
        manager.close();
        assertThatThrownBy(() -> affine.launch(LaunchShape.of(8), 8L)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatThrownBy(this::affine).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void aSourceInNoLanguageOfTheBackendIsRefusedNamingBoth() {
        Set<KernelSource.Language> runs = manager.kernels().languages();
        List<KernelSource> others = new ArrayList<>();
        for (KernelSource source : sources("affine", AFFINE)) {
            if (!runs.contains(source.language())) {
                others.add(source);
            }
        }
        assertThat(others).isNotEmpty();
        assertThatThrownBy(() -> manager.kernels().compile(others.getFirst(), others.subList(1, others.size()).toArray(KernelSource[]::new)))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("the " + manager.backendInfo().backend() + " backend compiles kernels in " + runs)
                .hasMessageContaining(others.getFirst().toString());
    }

    /** What a launch that must fail failed with: thrown, or (a Java kernel's own check) its future's failure. */
    protected static Throwable failureOf(java.util.function.Supplier<CompletableFuture<Void>> launch) {
        CompletableFuture<Void> done;
        try {
            done = launch.get();
        } catch (RuntimeException thrown) {
            return thrown;
        }
        try {
            done.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException failed) {
            return failed.getCause();
        } catch (Exception e) {
            throw new AssertionError("the launch neither threw nor failed: " + e, e);
        }
        throw new AssertionError("the launch succeeded");
    }

    protected static float[] ramp(int n) {
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = i % 1000 - 500;
        }
        return values;
    }

    protected static float[] filled(int n, float value) {
        float[] values = new float[n];
        java.util.Arrays.fill(values, value);
        return values;
    }

    private static String resource(String name) {
        try (InputStream in = KernelContractTest.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is missing from the test class path");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
