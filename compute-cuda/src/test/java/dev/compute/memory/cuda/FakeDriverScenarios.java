package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

/**
 * Runs a test's scenario in a JVM of its own on the stand-in driver ({@code src/test/c/fake-libcuda.c} built as
 * {@code libcuda.so.1}, first on {@code LD_LIBRARY_PATH} there), as {@link CudaBackendOnFakeDriverTest} does, for the
 * tests of the backend's parts that need a context, streams and events but no GPU; and, in that JVM, the fake's
 * controls ({@link Stub}). Loaded into the test's own JVM under the driver's name, the fake would answer every other
 * test's probe for a real driver. Skips where there is no C compiler, or where the tests are not on
 * {@code java.class.path}.
 */
final class FakeDriverScenarios {
    private FakeDriverScenarios() {}

    private static Path built;

    /** The directory holding the fake as {@code libcuda.so.1}, built once per test JVM; skips the test where it cannot be. */
    static synchronized Path fakeDriver(Class<?> testClass) throws IOException, InterruptedException, URISyntaxException {
        Path testClasses = Path.of(testClass.getProtectionDomain().getCodeSource().getLocation().toURI());
        assumeTrue(Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator)).map(Path::of).anyMatch(testClasses::equals),
                "the tests are not on java.class.path (a launcher with a class loader of its own), which the scenario's JVM is given");
        if (built == null) {
            Path dir = Files.createTempDirectory("fake-libcuda");
            dir.toFile().deleteOnExit();
            FakeDriverLibrary.compile(dir, DriverLibrary.LIBRARY);
            dir.resolve(DriverLibrary.LIBRARY).toFile().deleteOnExit();
            built = dir;
        }
        return built;
    }

    /** Runs {@code main} with the scenario's name in a JVM on the fake driver; fails with what it printed if it fails. */
    static void run(Class<?> main, String scenario) throws Exception {
        Path dir = fakeDriver(main);
        Path output = Files.createTempFile(scenario, ".out");
        try {
            ProcessBuilder java = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-Xmx256m", "-cp", System.getProperty("java.class.path"), main.getName(), scenario)
                    .redirectErrorStream(true).redirectOutput(output.toFile());
            java.environment().put("LD_LIBRARY_PATH", dir.toString());
            Process process = java.start();
            boolean exited = process.waitFor(120, TimeUnit.SECONDS);
            if (!exited) {
                process.destroyForcibly().waitFor();
            }
            String printed = Files.readString(output);
            assertThat(exited).as("scenario %s ended within 2 minutes; it printed:%n%s", scenario, printed).isTrue();
            assertThat(process.exitValue()).as("scenario %s exit status; it printed:%n%s", scenario, printed).isZero();
        } finally {
            Files.deleteIfExists(output);
        }
    }

    /** Runs the scenario in the scenario's JVM and exits with its outcome: 0, or 1 after printing what failed. */
    static void exitWith(ThrowingRunnable scenario) {
        try {
            scenario.run();
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Throwable;
    }

    /** What the fake counts, as it stands now. */
    record Counters(long contextReferences, long resets, long streams, long events, long eventsRecorded,
                    long pinned, long managed, long device, long callsWithoutContext, long rejected) {}

    /** The fake's controls, in the scenario's JVM only (where {@code libcuda.so.1} is the fake). */
    static final class Stub {
        private Stub() {}

        private static final SymbolLookup FAKE = SymbolLookup.libraryLookup(DriverLibrary.LIBRARY, Arena.global());
        private static final MethodHandle HOLD = stub("stub_hold", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle RELEASE = stub("stub_release", FunctionDescriptor.ofVoid());
        private static final MethodHandle FAILING_STREAMS = stub("stub_failing_streams", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle COUNTERS = stub("stub_backend_counters", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

        private static MethodHandle stub(String name, FunctionDescriptor descriptor) {
            return Linker.nativeLinker().downcallHandle(FAKE.find(name).orElseThrow(
                    () -> new IllegalStateException(DriverLibrary.LIBRARY + " here is not the fake driver: it has no " + name)), descriptor);
        }

        /** Events recorded from now on wait until {@link #release()}. */
        static void hold() throws Throwable {
            HOLD.invokeExact(1);
        }

        /** Events recorded from now on complete at once; those recorded while holding still wait for {@link #release()}. */
        static void stopHolding() throws Throwable {
            HOLD.invokeExact(0);
        }

        static void release() throws Throwable {
            RELEASE.invokeExact();
        }

        /** Streams made while on report CUDA_ERROR_ILLEGAL_ADDRESS for every event recorded on them. */
        static void failingStreams(boolean on) throws Throwable {
            FAILING_STREAMS.invokeExact(on ? 1 : 0);
        }

        static Counters counters() throws Throwable {
            try (Arena scratch = Arena.ofConfined()) {
                MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 10);
                COUNTERS.invokeExact(out);
                long[] c = out.toArray(ValueLayout.JAVA_LONG);
                return new Counters(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]);
            }
        }

        /** A context on the fake's device 0, current on the calling thread. */
        static CudaContext context() {
            DriverLibrary driver = DriverLibrary.loadedOrNull();
            if (driver == null) {
                throw new IllegalStateException(DriverLibrary.unavailableReason());
            }
            return new CudaContext(driver, 0);
        }
    }
}
