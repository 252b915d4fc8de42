package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The CPU backend in a runtime image trimmed to the modules it needs ({@code jlink}, {@code --limit-modules}): without
 * {@code jdk.jfr} it runs and emits no events, with no error (compute-core's README); without {@code jdk.management},
 * through which it reads the machine's and the container's memory, it says it is unavailable and names the module.
 */
class TrimmedRuntimeTest {

    /** Starts a manager on the CPU backend and uses it (a trim, an out-of-memory, a compaction: JFR events where JFR is there). */
    public static void main(String[] args) {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend(args[0]).maxPoolSize(64L << 20).build()) {
            memory.allocate(4L << 20).close();
            try {
                memory.allocate(100L << 20);
            } catch (DeviceOutOfMemoryException expected) {
                // an OutOfMemory event where JFR is there
            }
            memory.trim();
            memory.compact();
            System.out.println("STARTED on " + memory.backendInfo().backend() + ", " + memory.statistics(MemoryLocation.HOST).backendAllocations()
                    + " backend allocation(s)");
        } catch (BackendUnavailableException e) {
            System.out.println("UNAVAILABLE: " + e.getMessage());
        }
    }

    @Test
    void withoutJdkJfrTheBackendRunsWithNoEventsAndNoError() throws Exception {
        String output = runTrimmed("java.base,java.logging,jdk.management", "cpu");
        assertThat(output).contains("STARTED on cpu, 1 backend allocation(s)").doesNotContain("Exception").doesNotContain("Error");
    }

    @Test
    void withoutJdkManagementTheBackendIsUnavailableNamingTheModule() throws Exception {
        // it failed its probe with "NoClassDefFoundError: com/sun/management/OperatingSystemMXBean", naming no module to add
        String output = runTrimmed("java.base,java.logging", "auto");
        assertThat(output).contains("UNAVAILABLE: ").contains("cpu=").contains("the jdk.management module")
                .doesNotContain("NoClassDefFoundError");
    }

    private static String runTrimmed(String modules, String backend) throws IOException, InterruptedException {
        Path output = Files.createTempFile("trimmed-runtime", ".txt");
        try {
            List<String> command = List.of(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()),
                    "--limit-modules", modules, "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                    "-cp", System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
                    TrimmedRuntimeTest.class.getName(), backend);
            Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output.toFile()).start();
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            return Files.readString(output);
        } finally {
            Files.deleteIfExists(output);
        }
    }
}
