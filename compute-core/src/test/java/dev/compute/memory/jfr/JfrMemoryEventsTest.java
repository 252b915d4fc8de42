package dev.compute.memory.jfr;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pool's events as the JDK's tools see them: a JFR recording dumped to a file and read back with
 * {@link RecordingFile}, as {@code jfr print --events dev.compute.memory.*} reads it. Other tests' managers may
 * emit events into the same recording, so each check looks for the event this test caused.
 */
class JfrMemoryEventsTest {

    private static final long MiB = 1L << 20;
    private static final List<String> EVENTS = List.of("BackendAllocation", "BackendFree", "OutOfMemory", "OutOfMemoryRecovery",
            "Trim", "Compaction", "Leak", "SnapshotRead");

    @SuppressWarnings("resource")
    private static void leak(UnifiedMemoryManager manager) {
        manager.allocate(12_345, MemoryLocation.HOST);
    }

    @Test
    void backendCallsOutOfMemoryTrimsAndLeaksArriveWithTheirFields(@TempDir Path dir) throws IOException, InterruptedException {
        Path file = dir.resolve("memory.jfr");
        try (Recording recording = new Recording()) {
            EVENTS.forEach(name -> recording.enable("dev.compute.memory." + name));
            recording.start();
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64 * MiB))
                    .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
                manager.allocate(5 * MiB, MemoryLocation.DEVICE).close();
                assertThatThrownBy(() -> manager.allocate(100 * MiB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
                manager.allocate(5 * MiB, MemoryLocation.DEVICE).close();
                assertThat(manager.releaseCachedMemory()).isPositive();
                manager.compact(MemoryLocation.DEVICE);
                manager.allocate(3 * MiB, MemoryLocation.DEVICE).close();
                manager.snapshot(MemoryLocation.DEVICE);
                leak(manager);
                for (int i = 0; i < 200 && manager.leaksDetected() == 0; i++) {
                    System.gc();
                    Thread.sleep(20);
                }
                assertThat(manager.leaksDetected()).isEqualTo(1);
            }
            recording.stop();
            recording.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);

        assertThat(ofType(events, "BackendAllocation")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getLong("bytes")).isGreaterThanOrEqualTo(5 * MiB);
            assertThat(e.getDuration("callDuration")).isPositive();
            assertThat(e.getStackTrace()).as("who caused the pool miss").isNotNull();
        });
        assertThat(ofType(events, "BackendFree")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getLong("bytes")).isPositive();
        });
        assertThat(ofType(events, "OutOfMemoryRecovery")).anySatisfy(e -> {
            assertThat(e.getLong("requestedBytes")).isEqualTo(100 * MiB);
            assertThat(e.getString("outcome")).isEqualTo("FAILED");
        });
        assertThat(ofType(events, "OutOfMemory")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getLong("requestedBytes")).isEqualTo(100 * MiB);
            assertThat(e.getString("reason")).isEqualTo("DEVICE_MEMORY");
        });
        assertThat(ofType(events, "Trim")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getLong("releasedBytes")).isPositive();
        });
        assertThat(ofType(events, "Compaction")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getLong("buffersMoved")).isZero();
            assertThat(e.getDuration("compactionDuration")).isPositive();
        });
        assertThat(ofType(events, "SnapshotRead")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("DEVICE");
            assertThat(e.getInt("blocks")).isPositive();
            assertThat(e.getInt("holds")).isPositive();
            assertThat(e.getDuration("longestHold")).isPositive().isLessThanOrEqualTo(e.getDuration("readDuration"));
        });
        assertThat(ofType(events, "Leak")).anySatisfy(e -> {
            assertThat(e.getString("location")).isEqualTo("HOST");
            assertThat(e.getLong("bytes")).isEqualTo(12_345);
            assertThat(e.getString("allocationSite")).contains(JfrMemoryEventsTest.class.getName() + ".leak(");
        });
    }

    @Test
    void theEventsAreRegisteredUnderTheirNamesInTheComputeMemoryCategory() {
        new JfrMemoryEventListener().trimmed(MemoryLocation.HOST, 1); // loads the event classes without a recording taking them
        new JfrMemoryEventListener().backendAllocated(MemoryLocation.HOST, 1, 1);
        List<EventType> types = FlightRecorder.getFlightRecorder().getEventTypes().stream()
                .filter(type -> type.getName().startsWith("dev.compute.memory.")).toList();
        assertThat(types).extracting(EventType::getName).contains("dev.compute.memory.Trim", "dev.compute.memory.BackendAllocation");
        assertThat(types).allSatisfy(type -> {
            assertThat(type.getCategoryNames()).containsExactly("Compute", "Memory");
            assertThat(type.getLabel()).startsWith("Compute ");
            assertThat(type.getField("location")).isNotNull();
        });
    }

    @Test
    void aRuntimeWithJfrGetsTheListenerThatEmits() {
        assertThat(JfrMemoryEvents.listener()).isInstanceOf(JfrMemoryEventListener.class);
    }

    private static List<RecordedEvent> ofType(List<RecordedEvent> events, String name) {
        return events.stream().filter(e -> e.getEventType().getName().equals("dev.compute.memory." + name)).toList();
    }
}
