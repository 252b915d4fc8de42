package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelCompileException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jocl.CL;
import org.jocl.CLException;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the OpenCL backend adds to the kernel contract ({@link OpenClKernelContractTest}): the compiler's log in a
 * failed build, launches checked against the kernel's parameters, HOST memory refused by name, the kernel objects'
 * pool, a close right after a launch on host-visible memory, the manager's native device, and JOCL's exception
 * mode, which changes nothing.
 */
class OpenClKernelTest {

    /** Fills x with v after spinning: long enough that the test can act while it runs. */
    private static final String SLOW_FILL = """
            __kernel void slow_fill(__global float *x, long n, float v, int spins) {
                long i = get_global_id(0);
                float acc = 1.0f;
                for (int k = 0; k < spins; k++) {
                    acc = acc * 1.0000001f + 0.0000001f;
                }
                if (i < n) {
                    x[i] = v + acc * 0.0f;
                }
            }
            """;
    private static final String TYPED = """
            __kernel void typed(__global float *x, __global const double *d, uint count, ulong total) {
                size_t i = get_global_id(0);
                if (i < count) { x[i] = (float) d[i] + (float) total; }
            }
            __kernel void with_local(__global float *x, __local float *scratch) {
                scratch[get_local_id(0)] = 1.0f;
                x[get_global_id(0)] = scratch[get_local_id(0)];
            }
            """;

    private UnifiedMemoryManager manager;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
    }

    @AfterEach
    void close() {
        if (manager != null) {
            manager.close();
        }
    }

    /**
     * A build that fails, in a JVM of its own: PoCL's compiler also prints its diagnostics to the process's standard
     * error, which would otherwise land in the build's output.
     */
    @Test
    void aBuildThatFailsCarriesTheCompilersLog() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), BrokenBuild.class);
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe())
                .contains("type: " + KernelCompileException.class.getName())
                .contains("message: building OpenCL C kernel 'broken' on OpenCL device", "CL_BUILD_PROGRAM_FAILURE")
                .contains("log: ").contains("undeclared_name")
                .contains("message ends with the log: true");
    }

    /** The child of {@link #aBuildThatFailsCarriesTheCompilersLog}: prints what the failed compile threw. */
    static final class BrokenBuild {
        public static void main(String[] args) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
                manager.kernels().compile(KernelSource.openCl("__kernel void broken(__global float *x) { x[0] = undeclared_name; }", "broken"));
                System.out.println("the broken kernel compiled");
            } catch (KernelCompileException e) {
                System.out.println("type: " + e.getClass().getName());
                System.out.println("message: " + e.getMessage());
                System.out.println("log: " + e.buildLog());
                System.out.println("message ends with the log: " + e.getMessage().endsWith(e.buildLog()));
            }
        }
    }

    /**
     * Launches racing their manager's close, in a JVM of its own: a launch of a kernel that takes only scalars opens no
     * access, and nothing held the close back from releasing the queue under its enqueue (the JVM ended with SIGSEGV in
     * clEnqueueNDRangeKernel). A launch is a call of the manager: it runs before the release or is refused.
     */
    @Test
    void launchesRacingTheManagersCloseNeverReachItsReleasedQueue() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), LaunchesRacingClose.class);
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe()).contains("launched: true, refused: true");
    }

    /** The child of {@link #launchesRacingTheManagersCloseNeverReachItsReleasedQueue}. */
    static final class LaunchesRacingClose {
        public static void main(String[] args) throws Exception {
            boolean launched = false;
            boolean refused = false;
            for (int round = 0; round < 40; round++) {
                UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
                ComputeKernel scalars = manager.kernels().compile(KernelSource.openCl(
                        "__kernel void scalars(int a, long b, float c, double d) { }", "scalars"));
                AtomicInteger launches = new AtomicInteger();
                AtomicBoolean closed = new AtomicBoolean();
                List<Thread> launchers = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    launchers.add(Thread.ofPlatform().start(() -> {
                        while (true) {
                            try {
                                scalars.launch(LaunchShape.of(1), 1, 2L, 3f, 4.0);
                                launches.incrementAndGet();
                            } catch (IllegalStateException closedManager) {
                                closed.set(true);
                                return;
                            }
                        }
                    }));
                }
                while (launches.get() < 10) {
                    Thread.onSpinWait();
                }
                manager.close();
                for (Thread launcher : launchers) {
                    launcher.join();
                }
                launched |= launches.get() > 0;
                refused |= closed.get();
            }
            System.out.println("launched: " + launched + ", refused: " + refused);
        }
    }

    /**
     * A work-group within the kernel's total but past the device's most in one dimension (a GPU's 1024 x 1024 x 64) is
     * refused before the launch syncs anything; PoCL's limit in each dimension is its total, so the rule is checked here.
     */
    @Test
    void aWorkGroupPastTheDevicesMostInOneDimensionIsSaidSo() {
        long[] gpu = {1024, 1024, 64};
        assertThat(OpenClKernel.beyondDevice(new long[] {1, 1, 128}, gpu)).isEqualTo("a work-group of [1, 1, 128] has 128 work items"
                + " in dimension 2, more than the device's 64 there (CL_DEVICE_MAX_WORK_ITEM_SIZES [1024, 1024, 64])");
        assertThat(OpenClKernel.beyondDevice(new long[] {1024, 1}, gpu)).isNull();
        assertThat(OpenClKernel.beyondDevice(new long[] {1, 1, 64}, gpu)).isNull();
        assertThat(OpenClKernel.beyondDevice(new long[] {4096}, null)).as("a device that cannot say").isNull();
        OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
        try {
            assertThat(OpenClCalls.maxWorkItemSizes(backend.deviceId())).as("the device says").isNotNull().hasSizeGreaterThanOrEqualTo(3);
        } finally {
            backend.close();
        }
    }

    @Test
    void aMisnamedKernelOrABadOptionIsACompileError() {
        KernelSource misnamed = KernelSource.openCl(TYPED, "typo");
        assertThatThrownBy(() -> manager.kernels().compile(misnamed)).isInstanceOf(KernelCompileException.class)
                .hasMessageContaining("has no __kernel named 'typo'").hasMessageContaining("typed").hasMessageContaining("with_local");
        KernelSource badOption = KernelSource.openCl(TYPED, "typed", "-cl-no-such-option");
        assertThatThrownBy(() -> manager.kernels().compile(badOption)).isInstanceOf(KernelCompileException.class)
                .hasMessageContaining("options '-cl-no-such-option'");
    }

    @Test
    void launchesAreCheckedAgainstTheKernelsParameters() {
        ComputeKernel typed = manager.kernels().compile(KernelSource.openCl(TYPED, "typed"));
        ComputeKernel withLocal = manager.kernels().compile(KernelSource.openCl(TYPED, "with_local"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4); UnifiedBuffer d = manager.allocate(DataType.FLOAT64, 4);
             UnifiedBuffer bytes = manager.allocate(32)) {
            x.copyFrom(new float[4]);
            d.copyFrom(new double[] {1, 2, 3, 4});
            assertThatThrownBy(() -> typed.launch(LaunchShape.of(4), x, d, 4))
                    .isInstanceOf(IllegalArgumentException.class).hasMessage("kernel 'typed' takes 4 argument(s); the launch passed 3");
            assertThatThrownBy(() -> typed.launch(LaunchShape.of(4), d, d, 4, 0L))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel 'typed', argument 0 (a buffer, UnifiedBuffer[DEVICE, 32 bytes, FLOAT64")
                    .hasMessageContaining("parameter 0 'x' is __global float*; pass a FLOAT32 buffer (this one is FLOAT64)");
            assertThatThrownBy(() -> typed.launch(LaunchShape.of(4), x, d, 4L, 0L))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("argument 2 (a Long 4): the kernel's parameter 2 'count' is uint; pass an Integer");
            assertThatThrownBy(() -> typed.launch(LaunchShape.of(4), x, 1.0, 4, 0L))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pass a UnifiedBuffer or a KernelArg");
            assertThatThrownBy(() -> withLocal.launch(LaunchShape.of(4), x, x))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("__local parameters are not taken");

            typed.launch(LaunchShape.of(4), KernelArg.write(x), KernelArg.read(d), 4, 10L).join();
            typed.launch(LaunchShape.of(4), KernelArg.write(bytes), KernelArg.read(d), 4, 20L).join(); // a buffer by bytes fits any pointer
            float[] result = new float[4];
            x.copyTo(result);
            assertThat(result).containsExactly(11, 12, 13, 14);
            bytes.copyTo(0, result, 0, 4);
            assertThat(result).containsExactly(21, 22, 23, 24);
        }
    }

    @Test
    void aScalarDeclaredThroughATypedefIsCheckedAsItsType() {
        ComputeKernel scale = manager.kernels().compile(KernelSource.openCl("""
                typedef float real;
                typedef unsigned int count_t;
                __kernel void scale(__global float *x, const count_t n, real a) {
                    uint i = get_global_id(0);
                    if (i < n) { x[i] *= a; }
                }
                """, "scale"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 8)) {
            float[] values = {1, 2, 3, 4, 5, 6, 7, 8};
            x.copyFrom(values);
            scale.launch(LaunchShape.of(8), x, 8, 2f).join();
            x.copyTo(values);
            assertThat(values).containsExactly(2, 4, 6, 8, 10, 12, 14, 16);
            assertThatThrownBy(() -> scale.launch(LaunchShape.of(8), x, 8, 2.0)).as("a Double for a typedef of float")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 2").hasMessageContaining("pass a Float");
            assertThatThrownBy(() -> scale.launch(LaunchShape.of(8), x, 8L, 2f)).as("a Long for a typedef of unsigned int")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1");
        }
    }

    /**
     * A typedef the preprocessor chooses (the precision a build option sets, a common idiom) is declared twice in the
     * text, which alone cannot say which one the build took: a launch may pass either, and only what neither is is
     * refused (the check took the last declaration in the text, and refused every launch of the double build).
     */
    @Test
    void aTypedefChosenByABuildOptionIsCheckedAsTheOneBuilt() {
        String source = """
                #ifdef USE_DOUBLE
                typedef double real;
                #else
                typedef float real;
                #endif
                __kernel void scale(__global real *x, long n, real a) {
                    long i = get_global_id(0);
                    if (i < n) { x[i] *= a; }
                }
                """;
        ComputeKernel inDouble = manager.kernels().compile(KernelSource.openCl(source, "scale", "-D USE_DOUBLE"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT64, 4)) {
            double[] values = {1, 2, 3, 4};
            x.copyFrom(values);
            inDouble.launch(LaunchShape.of(4), x, 4L, 0.5).join();
            x.copyTo(values);
            assertThat(values).containsExactly(0.5, 1, 1.5, 2);
            assertThatThrownBy(() -> inDouble.launch(LaunchShape.of(4), x, 4L, 1)).as("an Integer, which real is in no build")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 2")
                    .hasMessageContaining("declared as double and float").hasMessageContaining("pass a Double or a Float");
        }
        try (UnifiedBuffer ints = manager.allocate(DataType.INT32, 4)) {
            assertThatThrownBy(() -> inDouble.launch(LaunchShape.of(4), ints, 4L, 0.5)).as("an INT32 buffer, which real* is in no build")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 0")
                    .hasMessageContaining("pass a FLOAT64 or a FLOAT32 buffer");
        }
        ComputeKernel inFloat = manager.kernels().compile(KernelSource.openCl(source, "scale"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 4)) {
            float[] values = {1, 2, 3, 4};
            x.copyFrom(values);
            inFloat.launch(LaunchShape.of(4), x, 4L, 2f).join();
            x.copyTo(values);
            assertThat(values).containsExactly(2, 4, 6, 8);
        }
    }

    /**
     * A typedef in a comment declares nothing: the check took it as one of the types the build may have chosen, and let a
     * FLOAT32 buffer and a Float through to a kernel built for doubles, which then reads and writes twice the buffer's
     * bytes (here within the pool's 512-byte block).
     */
    @Test
    void aTypedefInACommentDeclaresNothing() {
        ComputeKernel scale = manager.kernels().compile(KernelSource.openCl("""
                typedef double real; // for single precision: typedef float real;
                /* typedef int count_t; */
                __kernel void scale(__global real *x, long n, real a) {
                    long i = get_global_id(0);
                    if (i < n) { x[i] *= a; }
                }
                """, "scale"));
        try (UnifiedBuffer floats = manager.allocate(DataType.FLOAT32, 4); UnifiedBuffer doubles = manager.allocate(DataType.FLOAT64, 4)) {
            assertThatThrownBy(() -> scale.launch(LaunchShape.of(4), floats, 4L, 2.0)).as("a FLOAT32 buffer for double*")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 0").hasMessageContaining("pass a FLOAT64 buffer");
            assertThatThrownBy(() -> scale.launch(LaunchShape.of(4), doubles, 4L, 2f)).as("a Float for double")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 2").hasMessageContaining("pass a Double");
            double[] values = {1, 2, 3, 4};
            doubles.copyFrom(values);
            scale.launch(LaunchShape.of(4), doubles, 4L, 2.0).join();
            doubles.copyTo(values);
            assertThat(values).containsExactly(2, 4, 6, 8);
        }
    }

    /**
     * A launch is checked before its accesses open, and may then wait for work on its first buffer: what it passes is
     * what was checked, whatever the caller's thread does to its argument array meanwhile (a Long where the kernel
     * takes an int, refused had it been passed so, would reach clSetKernelArg, and CUDA's launch with its size unchecked).
     */
    @Test
    void aLaunchPassesTheArgumentsAsCheckedWhateverTheArrayBecomesMeanwhile() throws Exception {
        ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 16)) {
            CompletableFuture<Void> held = new CompletableFuture<>(); // work of one's own on x, which the launch waits for
            try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) {
                access.inFlightUntil(held);
            }
            Object[] arguments = {x, 16L, 1f, 0};
            int dependents = held.getNumberOfDependents();
            CompletableFuture<CompletableFuture<Void>> launched = CompletableFuture.supplyAsync(() -> fill.launch(LaunchShape.of(16), arguments),
                    runnable -> Thread.ofPlatform().start(runnable));
            while (held.getNumberOfDependents() == dependents) { // the launch, checked, waits for the held work on x
                assertThat(launched).isNotDone();
                Thread.onSpinWait();
            }
            arguments[1] = 16; // an Integer where the kernel takes a long
            arguments[2] = 2f;
            held.complete(null);

            launched.get(10, TimeUnit.SECONDS).get(10, TimeUnit.SECONDS);
            float[] result = new float[16];
            x.copyTo(result);
            assertThat(result).as("filled with the value checked").containsOnly(1f);
        }
    }

    @Test
    void aShapeThatCannotBeRoundedUpToWholeWorkGroupsIsRefusedByName() {
        ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 16)) {
            assertThatThrownBy(() -> fill.launch(LaunchShape.of(Long.MAX_VALUE), x, 16L, 1f, 0))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("LaunchShape[" + Long.MAX_VALUE + "]").hasMessageContaining("work-groups of");
            fill.launch(LaunchShape.of(16), x, 16L, 1f, 0).join();
            float[] result = new float[16];
            x.copyTo(result);
            assertThat(result).as("the buffer, after the refused launch").containsOnly(1f);
        }
    }

    /**
     * A launch of 2^32 work-groups or more: PoCL's CPU device counts a launch's work-groups in 32 bits and ended the
     * JVM (SIGILL at exactly 2^32, an assertion in its scheduler beyond), after the accesses had synced and marked the
     * buffers. It is refused by name before anything runs (in a JVM of its own, for the crash).
     */
    @Test
    void aLaunchOfMoreWorkGroupsThan32BitsCountIsRefusedBeforeAnythingRuns() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), TooManyWorkGroups.class);
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe())
                .contains("refused: kernel 'fill_one' over LaunchShape[1099511627776] needs [4294967296] work-groups of [256], more than"
                        + " the 2^32-1 a launch may have in all")
                .contains("refused: kernel 'fill_one' over LaunchShape[65536, 65536] in work-groups of [1, 1] needs [65536, 65536]")
                .contains("refused: kernel 'fill_one' over LaunchShape[9223372036854775807, 2]")
                .contains("state: HOST_DIRTY");
    }

    /** The child of {@link #aLaunchOfMoreWorkGroupsThan32BitsCountIsRefusedBeforeAnythingRuns}. */
    static final class TooManyWorkGroups {
        public static void main(String[] args) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 16)) {
                ComputeKernel fill = manager.kernels().compile(KernelSource.openCl("""
                        __kernel void fill_one(__global float *x, long n) {
                            long i = get_global_id(0);
                            if (i < n) { x[i] = 1.0f; }
                        }""", "fill_one"));
                x.copyFrom(new float[16]);
                try (BufferAccess access = x.hostAccess(AccessMode.WRITE)) {
                    access.segment().fill((byte) 0);
                }
                for (LaunchShape shape : List.of(LaunchShape.of(1L << 40), LaunchShape.of(1 << 16, 1 << 16).withWorkGroup(1, 1),
                        LaunchShape.of(Long.MAX_VALUE, 2).withWorkGroup(1, 1))) {
                    try {
                        fill.launch(shape, x, 16L).join();
                        System.out.println("launched over " + shape);
                    } catch (IllegalArgumentException e) {
                        System.out.println("refused: " + e.getMessage());
                    }
                }
                System.out.println("state: " + x.state());
            }
        }
    }

    /**
     * A launch racing another thread's close of its buffer (whole, or through an unaligned slice, which is staged) either
     * runs or fails naming the kernel and the argument: never another exception, never a hang.
     */
    @Test
    void aLaunchRacingItsBuffersCloseRunsOrFailsNamingTheArgument() throws Exception {
        ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (int round = 0; round < 200; round++) {
                UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1000, round % 3 == 0 ? MemoryLocation.PINNED : MemoryLocation.DEVICE);
                x.copyFrom(new float[1000]);
                UnifiedBuffer argument = round % 2 == 0 ? x.slice(round % 5 + 1, 900) : x;
                CyclicBarrier start = new CyclicBarrier(2);
                Future<?> closing = pool.submit(() -> {
                    start.await();
                    x.close();
                    return null;
                });
                Future<Throwable> launching = pool.submit(() -> {
                    start.await();
                    try {
                        fill.launch(LaunchShape.of(900), KernelArg.write(argument), 900L, 1f, 0).get(30, TimeUnit.SECONDS);
                        return null;
                    } catch (Throwable e) {
                        return e;
                    }
                });
                closing.get(30, TimeUnit.SECONDS);
                Throwable failure = launching.get(60, TimeUnit.SECONDS);
                if (failure != null) {
                    assertThat(failure).as("round %d", round).isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining("kernel 'slow_fill', argument 0").hasMessageContaining("closed");
                }
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * A kernel whose {@code __local} arrays are larger than the device's local memory cannot run there: PoCL built it and
     * ended the JVM at its launch (an assertion in its pthread driver) where OpenCL has the enqueue fail. Its compile
     * fails instead, naming both sizes, and a kernel within the local memory builds and runs (in a JVM of its own, for
     * the crash).
     */
    @Test
    void aKernelUsingMoreLocalMemoryThanTheDeviceHasFailsToCompile() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), OversizedLocalMemory.class);
        Assumptions.assumeFalse(child.exitCode() == 134 && child.output().contains("PoCL detected an OpenCL program error"),
                "this PoCL's compiler ends the process on such a kernel before the backend can see it (compute-opencl's README): "
                        + child.describe());
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        assertThat(child.output()).as(child.describe())
                .contains("not compiled: OpenCL C kernel 'big_local' uses 16777216 bytes of __local memory, more than the")
                .contains("of local memory of OpenCL device").contains("(CL_DEVICE_LOCAL_MEM_SIZE)")
                .contains("small_local ran: 1.0");
    }

    /** The child of {@link #aKernelUsingMoreLocalMemoryThanTheDeviceHasFailsToCompile}. */
    static final class OversizedLocalMemory {
        private static final String LOCAL_ARRAY = """
                __kernel void %s(__global float *x) {
                    __local float scratch[%d];
                    scratch[get_local_id(0)] = 1.0f;
                    barrier(CLK_LOCAL_MEM_FENCE);
                    x[get_global_id(0)] = scratch[0];
                }""";

        public static void main(String[] args) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 256)) {
                for (String kernel : List.of(LOCAL_ARRAY.formatted("big_local", 1 << 22), LOCAL_ARRAY.formatted("small_local", 1 << 14))) {
                    String name = kernel.contains("big_local") ? "big_local" : "small_local";
                    try {
                        manager.kernels().compile(KernelSource.openCl(kernel, name)).launch(LaunchShape.of(256), x).join();
                        float[] result = new float[1];
                        x.copyTo(0, result, 0, 1);
                        System.out.println(name + " ran: " + result[0]);
                    } catch (KernelCompileException e) {
                        System.out.println("not compiled: " + e.getMessage());
                    }
                }
            }
        }
    }

    /**
     * A kernel that declares {@code reqd_work_group_size} runs only in that work-group: a shape that leaves the group to
     * the backend gets it (the default of 256 failed the enqueue with CL_INVALID_WORK_GROUP_SIZE, after the access had
     * synced the host copy and marked the device copy newer), and another group is refused by name before anything runs.
     */
    @Test
    void aKernelThatRequiresAWorkGroupGetsItAndAnyOtherIsRefusedBeforeAnythingRuns() {
        ComputeKernel add = manager.kernels().compile(KernelSource.openCl("""
                __kernel __attribute__((reqd_work_group_size(64, 1, 1)))
                void add_one(__global float *x, long n) {
                    long i = get_global_id(0);
                    if (i < n) { x[i] += 1.0f; }
                }""", "add_one"));
        ComputeKernel iota = manager.kernels().compile(KernelSource.openCl("""
                __kernel __attribute__((reqd_work_group_size(8, 4, 1)))
                void iota2d(__global int *out, int width, int height) {
                    int col = get_global_id(0);
                    int row = get_global_id(1);
                    if (col < width && row < height) { out[row * width + col] = row * width + col; }
                }""", "iota2d"));
        int n = 1000;
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n);
             UnifiedBuffer grid = manager.allocate(DataType.INT32, 30 * 10)) {
            x.copyFrom(new float[n]);
            add.launch(LaunchShape.of(n), x, (long) n).join();
            add.launch(LaunchShape.of(n).withWorkGroup(64), x, (long) n).join();

            try (BufferAccess access = x.hostAccess(AccessMode.WRITE)) {
                access.segment().fill((byte) 0);
            }
            assertThatThrownBy(() -> add.launch(LaunchShape.of(n).withWorkGroup(32), x, (long) n))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel 'add_one'").hasMessageContaining("a work-group of [32] where the kernel requires [64, 1, 1]");
            assertThat(x.state()).as("nothing synced, nothing marked newer").isEqualTo(BufferState.HOST_DIRTY);
            add.launch(LaunchShape.of(n), x, (long) n).join();
            float[] result = new float[n];
            x.copyTo(result);
            assertThat(result).containsOnly(1f);

            iota.launch(LaunchShape.of(30, 10), grid, 30, 10).join();
            int[] cells = new int[30 * 10];
            grid.copyTo(cells);
            for (int i = 0; i < cells.length; i++) {
                assertThat(cells[i]).as("cell %d", i).isEqualTo(i);
            }
            assertThatThrownBy(() -> iota.launch(LaunchShape.of(300), grid, 300, 1)).as("no work-group given")
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("the kernel requires a work-group of [8, 4, 1]")
                    .hasMessageContaining("which a 1-dimensional shape cannot have");
            assertThatThrownBy(() -> iota.launch(LaunchShape.of(300).withWorkGroup(32), grid, 300, 1))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a work-group of [32] where the kernel requires [8, 4, 1]");
        }
    }

    /**
     * An image parameter is __global too, but no buffer: a buffer passed for it was taken, and PoCL ended the JVM with
     * SIGSEGV in clEnqueueNDRangeKernel. It is refused by name before anything runs (in a JVM of its own, for the crash).
     */
    @Test
    void anImageParameterIsRefusedByNameBeforeAnythingRuns() throws Exception {
        ChildJvm.Result child = ChildJvm.run(Duration.ofMinutes(2), ImageParameter.class);
        assertThat(child.crashed()).as(child.describe()).isFalse();
        assertThat(child.exitCode()).as(child.describe()).isZero();
        Assumptions.assumeFalse(child.output().contains("no images on this device"), child.output());
        assertThat(child.output()).as(child.describe())
                .contains("refused: java.lang.IllegalArgumentException: kernel 'sample', argument 0 (a buffer, UnifiedBuffer[DEVICE")
                .contains("the kernel's parameter 0 'image' is image2d_t; images and pipes are not taken")
                .contains("refused: java.lang.IllegalArgumentException: kernel 'sample', argument 0 (an Integer 1)")
                .contains("state: HOST_DIRTY");
    }

    /** The child of {@link #anImageParameterIsRefusedByNameBeforeAnythingRuns}. */
    static final class ImageParameter {
        public static void main(String[] args) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
                ComputeKernel sample;
                try {
                    sample = manager.kernels().compile(KernelSource.openCl("""
                            __kernel void sample(__read_only image2d_t image, __global float *x) {
                                x[get_global_id(0)] = read_imagef(image, (int2) (0, 0)).x;
                            }""", "sample"));
                } catch (KernelCompileException e) {
                    System.out.println("no images on this device: " + e.getMessage());
                    return;
                }
                try (UnifiedBuffer image = manager.allocate(DataType.FLOAT32, 256);
                     UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 256)) {
                    x.copyFrom(new float[256]);
                    try (BufferAccess access = x.hostAccess(AccessMode.WRITE)) {
                        access.segment().fill((byte) 0);
                    }
                    for (Object first : new Object[] {image, 1}) {
                        try {
                            sample.launch(LaunchShape.of(256), first, x).join();
                            System.out.println("launched");
                        } catch (RuntimeException e) {
                            System.out.println("refused: " + e);
                        }
                    }
                    System.out.println("state: " + x.state());
                }
            }
        }
    }

    @Test
    void hostMemoryIsRefusedNamingTheKernelAndTheArgument() {
        ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        try (UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 16, MemoryLocation.HOST)) {
            assertThatThrownBy(() -> fill.launch(LaunchShape.of(16), host, 16L, 1f, 0))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("kernel 'slow_fill', argument 0 (UnifiedBuffer[HOST")
                    .hasMessageContaining("HOST memory on OpenCL is plain host memory")
                    .hasMessageContaining("allocate DEVICE (or PINNED) memory");
        }
    }

    /**
     * Host-visible memory (PINNED, and UNIFIED where the device has SVM) is where a kernel still running would
     * write into the next buffer's bytes if the pool handed its block on at once; the launch's accesses record the
     * kernel, so the block waits for it.
     */
    @Test
    void aCloseRightAfterTheLaunchFreesTheMemoryOnlyAfterTheKernel() throws Exception {
        ComputeKernel slowFill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        int n = 4096;
        int spins = spinsForAtLeast(slowFill, n, TimeUnit.MILLISECONDS.toNanos(500));
        List<MemoryLocation> told = new ArrayList<>();
        for (MemoryLocation location : List.of(MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
            if (!manager.locations().contains(location)) {
                continue;
            }
            UnifiedBuffer first = manager.allocate(DataType.FLOAT32, n, location);
            long firstAddress = first.readOnlyHostView().address();
            // a free block of the size beside first's, so that the next allocation needs no backend call: a new PINNED
            // allocation maps its buffer with a blocking map, which waits for the queue, kernel included
            manager.allocate(DataType.FLOAT32, n, location).close();
            CompletableFuture<Void> running = slowFill.launch(LaunchShape.of(n), KernelArg.write(first), (long) n, 7f, spins);
            first.close();
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, n, location)) {
                next.copyFrom(filled(n, 1f)); // a host copy: it does not queue behind the kernel
                if (!running.isDone()) { // the kernel still runs: whatever the pool gave next, it is not first's block
                    told.add(location);
                    assertThat(next.readOnlyHostView().address()).as("%s: the closed buffer's block waits for its kernel", location)
                            .isNotEqualTo(firstAddress);
                }
                running.get(60, TimeUnit.SECONDS);
                float[] result = new float[n];
                next.copyTo(result);
                assertThat(result).as("%s: the kernel wrote only the closed buffer's memory", location).containsOnly(1f);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            boolean reused = false;
            while (!reused && System.nanoTime() < deadline) {
                try (UnifiedBuffer again = manager.allocate(DataType.FLOAT32, n, location)) {
                    reused = again.readOnlyHostView().address() == firstAddress;
                }
            }
            assertThat(reused).as("%s: once the kernel is done, the block goes back to the pool", location).isTrue();
        }
        // where the launch returns only once its kernel has run (seen on NVIDIA's OpenCL for PINNED memory, H200, driver
        // 580; the access's end maps the written buffer there), no close can come while the kernel runs
        Assumptions.assumeFalse(told.isEmpty(), "on " + manager.backendInfo().deviceName() + " every launch on host-visible"
                + " memory returned after its kernel had run, so no close could come while it ran");
    }

    /** The spins that keep slow_fill over {@code n} items running at least {@code nanos} on this device (a CPU or a GPU). */
    private int spinsForAtLeast(ComputeKernel slowFill, int n, long nanos) {
        long spins = 10_000;
        try (UnifiedBuffer probe = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            while (true) {
                long start = System.nanoTime();
                slowFill.launch(LaunchShape.of(n), KernelArg.write(probe), (long) n, 0f, (int) spins).join();
                long took = System.nanoTime() - start;
                if (took >= nanos || spins >= Integer.MAX_VALUE / 2) {
                    return (int) spins;
                }
                spins = Math.min(Integer.MAX_VALUE / 2, spins * Math.clamp(2 * nanos / Math.max(1, took), 2, 1000));
            }
        }
    }

    @Test
    void oneKernelObjectServesEveryLaunchOfAThreadAndThreadsGetTheirOwn() throws Exception {
        OpenClBackend backend = OpenClTestSupport.openBackend(OpenClTestSupport.defaultSettings());
        try {
            OpenClKernel kernel = (OpenClKernel) backend.compileKernel(KernelSource.openCl(SLOW_FILL, "slow_fill"));
            NativeAllocation allocation = backend.allocate(MemoryLocation.DEVICE, 8 * 1024 * Float.BYTES);
            for (int i = 0; i < 50; i++) {
                launchOn(backend, kernel, allocation, 0);
            }
            assertThat(kernel.kernelObjects()).as("launches one after another reuse one cl_kernel").isEqualTo(1);

            int threads = 6;
            CyclicBarrier start = new CyclicBarrier(threads);
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            try {
                List<Future<?>> done = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int slot = t;
                    done.add(pool.submit(() -> {
                        start.await();
                        for (int i = 0; i < 30; i++) {
                            launchOn(backend, kernel, allocation, slot);
                        }
                        return null;
                    }));
                }
                for (Future<?> future : done) {
                    future.get(2, TimeUnit.MINUTES);
                }
            } finally {
                pool.shutdownNow();
            }
            assertThat(kernel.kernelObjects()).as("at most one cl_kernel per launch under way at once").isBetween(1, threads);
            float[] values = new float[8 * 1024];
            backend.copyToHost(allocation, 0, java.lang.foreign.MemorySegment.ofArray(values), (long) values.length * Float.BYTES);
            for (int slot = 0; slot < threads; slot++) {
                assertThat(values[slot * 1024]).as("slot %d", slot).isEqualTo(slot);
                assertThat(values[slot * 1024 + 1023]).as("slot %d", slot).isEqualTo(slot);
            }
            backend.free(allocation);
        } finally {
            backend.close();
        }
    }

    /** slow_fill of the 1024 floats of {@code slot} with the slot's number, through the SPI, with a handle of its own. */
    private static void launchOn(OpenClBackend backend, OpenClKernel kernel, NativeAllocation allocation, int slot) {
        long offset = slot * 1024L * Float.BYTES;
        OpenClDeviceHandle handle = backend.openDeviceHandle(allocation, offset, 1024L * Float.BYTES, AccessMode.WRITE);
        try {
            kernel.launch(LaunchShape.of(1024), List.of(
                    new KernelArgument.Buffer(handle, null, 1024L * Float.BYTES, DataType.FLOAT32, AccessMode.WRITE, "slot " + slot),
                    new KernelArgument.Scalar(1024L), new KernelArgument.Scalar((float) slot), new KernelArgument.Scalar(1))).join();
        } finally {
            handle.end().join();
        }
    }

    @Test
    void theNativeDeviceIsTheBackendsContextDeviceAndQueue() {
        OpenClNativeDevice cl = manager.nativeDevice(OpenClNativeDevice.class);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 64);
             var access = buffer.deviceAccess(AccessMode.READ)) {
            OpenClDeviceHandle handle = access.handle(OpenClDeviceHandle.class);
            assertThat(cl.context()).isEqualTo(handle.context());
            assertThat(cl.device()).isEqualTo(handle.device());
            assertThat(cl.queue()).isEqualTo(handle.queue());
        }
        assertThat(cl.describe()).contains(manager.backendInfo().deviceName().split(" \\(")[0]);
        assertThat(cl.subBufferAlignment()).isPositive();
        cl_context context = cl.context();
        cl_command_queue queue = cl.queue();
        assertThat(context).isNotNull();
        assertThat(queue).isNotNull();
        interface SomethingElse extends dev.compute.memory.spi.NativeDevice {}
        assertThatThrownBy(() -> manager.nativeDevice(SomethingElse.class)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("the opencl backend has no SomethingElse; it hands out OpenClNativeDevice");
        manager.close();
        assertThatThrownBy(cl::queue).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        assertThatThrownBy(() -> manager.nativeDevice(OpenClNativeDevice.class)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
    }

    /**
     * JOCL's exception mode ({@code CL.setExceptionsEnabled(true)}, one switch for the JVM, on in most JOCL samples)
     * changes nothing the backend does: its own failures stay its own (a kernel name the program lacks, with the names
     * it has; a bad build option), and a kernel, an op and copies run as with it off. Before {@link JoclCalls}, JOCL's
     * {@code CLException} came out of the compile in place of the backend's {@code KernelCompileException}.
     */
    @Test
    void withJoclsExceptionModeOnTheBackendsOwnFailuresStayItsOwn() {
        CL.setExceptionsEnabled(true);
        try {
            aMisnamedKernelOrABadOptionIsACompileError();
            ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 64)) {
                x.copyFrom(new float[64]);
                fill.launch(LaunchShape.of(64), x, 64L, 2.0f, 1).join();
                manager.ops().scaleAsync(x, 3.0f).join();
                float[] read = new float[64];
                x.copyTo(read);
                assertThat(read).containsOnly(6.0f);
            }
        } finally {
            CL.setExceptionsEnabled(false);
        }
    }

    @Test
    void anUnalignedSliceIsStagedAndOnlyItsBytesChange() {
        Assumptions.assumeTrue(manager.nativeDevice(OpenClNativeDevice.class).subBufferAlignment() > Float.BYTES,
                "every float offset is a sub-buffer origin on this device");
        ComputeKernel fill = manager.kernels().compile(KernelSource.openCl(SLOW_FILL, "slow_fill"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 100, MemoryLocation.DEVICE)) {
            x.copyFrom(filled(100, 5f));
            try (UnifiedBuffer slice = x.slice(1, 10); var access = slice.deviceAccess(AccessMode.READ)) {
                assertThat(access.handle(OpenClDeviceHandle.class).isSubBuffer()).as("no sub-buffer starts 4 bytes in").isFalse();
            }
            fill.launch(LaunchShape.of(10), x.slice(1, 10), 10L, 2f, 0).join();
            float[] result = new float[100];
            x.copyTo(result);
            assertThat(result[0]).isEqualTo(5f);
            assertThat(java.util.Arrays.copyOfRange(result, 1, 11)).containsOnly(2f);
            assertThat(java.util.Arrays.copyOfRange(result, 11, 100)).containsOnly(5f);
        }
    }

    /**
     * One unaligned slice passed as two arguments (an in-place kernel written as out and in) is one memory to the kernel,
     * as it is at an aligned offset: a staged copy per argument would copy the unchanged input back over the output.
     */
    @Test
    void anUnalignedSlicePassedTwiceIsOneMemoryToTheKernel() {
        Assumptions.assumeTrue(manager.nativeDevice(OpenClNativeDevice.class).subBufferAlignment() > Float.BYTES,
                "every float offset is a sub-buffer origin on this device");
        ComputeKernel twice = manager.kernels().compile(KernelSource.openCl("""
                __kernel void twice(__global float *out, __global const float *in, long n) {
                    long i = get_global_id(0);
                    if (i < n) { out[i] = 2 * in[i]; }
                }
                """, "twice"));
        try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 100, MemoryLocation.DEVICE)) {
            for (int offset : new int[] {0, 1}) {
                x.copyFrom(filled(100, 5f));
                UnifiedBuffer slice = x.slice(offset, 10);
                twice.launch(LaunchShape.of(10), slice, slice, 10L).join();
                float[] result = new float[10];
                slice.copyTo(result);
                assertThat(result).as("a slice at element %d, passed as out and in", offset).containsOnly(10f);
            }
        }
    }

    private static float[] filled(int n, float value) {
        float[] values = new float[n];
        java.util.Arrays.fill(values, value);
        return values;
    }
}
