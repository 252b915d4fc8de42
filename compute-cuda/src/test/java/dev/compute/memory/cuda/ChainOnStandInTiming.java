package dev.compute.memory.cuda;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.BackendSettings;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import jcuda.driver.CUfunction;

/**
 * GpuBenchmark's chain (100 steps, each a kernel launched through JCuda in a device access, then an op, then one wait)
 * on the stand-in driver, not a GPU: the driver calls a step costs, per function, on the calling thread and in all
 * (the waiter's and callbacks' threads), and the calling thread's and the process's CPU time and the wall time a step.
 * The stand-in's calls cost next to nothing and its device finishes at once, so the times say what the backend's Java
 * side and its threads cost, not what a GPU run takes. Run with the stand-in first on the library path:
 *
 * <pre>
 * ./mvnw -o -B -q -pl compute-core,compute-cuda -am test-compile dependency:build-classpath -Dmdep.outputFile=/tmp/cp.txt
 * mkdir -p /tmp/stand-in &amp;&amp; cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o /tmp/stand-in/libcuda.so.1 compute-cuda/src/test/c/fake-libcuda.c
 * LD_LIBRARY_PATH=/tmp/stand-in java --enable-native-access=ALL-UNNAMED -Drounds=1000 \
 *     -cp compute-cuda/target/test-classes:compute-cuda/target/classes:$(cat /tmp/cp.txt) dev.compute.memory.cuda.ChainOnStandInTiming
 * </pre>
 */
public final class ChainOnStandInTiming {

    private static final String[] CALLS = {"cuLaunchKernel", "cuEventRecord", "cuEventSynchronize", "cuEventQuery",
            "cuStreamWaitEvent", "cuStreamQuery", "cuEventCreate", "cuCtxGetCurrent", "cuCtxSetCurrent"};
    private static final int STEPS = 100;

    private ChainOnStandInTiming() {}

    public static void main(String[] args) throws Throwable {
        SymbolLookup standIn = SymbolLookup.libraryLookup(DriverLibrary.LIBRARY, Arena.global());
        MethodHandle countOnThisThread = Linker.nativeLinker().downcallHandle(standIn.find("stub_count_on_this_thread")
                .orElseThrow(() -> new IllegalStateException(DriverLibrary.LIBRARY + " here is not the stand-in")), FunctionDescriptor.ofVoid());
        MethodHandle calls = Linker.nativeLinker().downcallHandle(standIn.find("stub_calls").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        int rounds = Integer.getInteger("rounds", 1000);
        CudaBackend backend = (CudaBackend) new CudaBackendProvider().create(new BackendSettings(0, true, 1 << 20, Map.of()));
        try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
             PtxModule ops = backend.loadModule(CudaKernelOps.PTX);
             UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
            CUfunction scale = ops.function("scale_f32");
            for (int round = 0; round < 300; round++) {
                CudaBackendOnFakeDriverTest.Scenarios.chain(manager, buffer, scale, STEPS).get(10, TimeUnit.SECONDS); // the JIT's warm-up
            }
            countOnThisThread.invokeExact();
            var threads = ManagementFactory.getThreadMXBean();
            var system = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
            long[] before = counts(calls);
            long callerCpu = threads.getCurrentThreadCpuTime();
            long processCpu = system.getProcessCpuTime();
            long wall = System.nanoTime();
            for (int round = 0; round < rounds; round++) {
                CudaBackendOnFakeDriverTest.Scenarios.chain(manager, buffer, scale, STEPS).get(10, TimeUnit.SECONDS);
            }
            wall = System.nanoTime() - wall;
            callerCpu = threads.getCurrentThreadCpuTime() - callerCpu;
            processCpu = system.getProcessCpuTime() - processCpu;
            Thread.sleep(200); // the callbacks of the last chain
            long[] after = counts(calls);
            double steps = (double) rounds * STEPS;
            System.out.printf("%-20s %10s %10s%n", "calls a step", "caller", "in all");
            for (int i = 0; i < CALLS.length; i++) {
                System.out.printf("%-20s %10.3f %10.3f%n", CALLS[i], (after[CALLS.length + i] - before[CALLS.length + i]) / steps,
                        (after[i] - before[i]) / steps);
            }
            System.out.printf("ns a step: caller cpu %.0f, process cpu %.0f, wall %.0f%n", callerCpu / steps, processCpu / steps, wall / steps);
        }
    }

    private static long[] counts(MethodHandle calls) throws Throwable {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 2L * CALLS.length);
            calls.invokeExact(out);
            return out.toArray(ValueLayout.JAVA_LONG);
        }
    }
}
