package dev.compute.memory.recording;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.BufferedReader;
import java.io.StringReader;
import java.io.StringWriter;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The replayer reads a trace with BufferedReader.readLine, which ends a line at '\r' as well as at '\n': a thread's
 * name (or the description) holding a '\r' must not split its header line, or the rest of the name is read as an event
 * (here a forged allocation of 1 TiB).
 */
class TraceLineEndsTest {

    @Test
    void aCarriageReturnInAThreadNameOrTheDescriptionStaysInsideItsCommentLine() throws Exception {
        AllocationRecorder recorder = new AllocationRecorder();
        AddressSpaceBackend backend = new AddressSpaceBackend(1L << 34, AddressSpaceBackend.DEFAULT_GRANULARITY, false);
        try (RecordingResource resource = new RecordingResource(new CachingPoolResource(new BackendResource(backend, MemoryLocation.HOST,
                1L << 33, "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE),
                PoolSettings.plainSegments(), MemoryEventListener.NONE), MemoryLocation.HOST, recorder)) {
            recorder.start(RecordingOptions.defaults(), "settings\ra,8,1,0,HOST,1,0");
            Thread named = Thread.ofPlatform().name("worker\ra,9,1099511627776,0,HOST,1,0").start(() -> resource.deallocate(resource.allocate(64)));
            named.join();
            AllocationTrace trace = recorder.stop();
            StringWriter text = new StringWriter();
            trace.writeTo(text);

            List<String> asTheReplayerReadsIt = new BufferedReader(new StringReader(text.toString())).lines().toList();
            assertThat(asTheReplayerReadsIt).as("one line per line the trace wrote").hasSize((int) trace.lines().count());
            assertThat(asTheReplayerReadsIt.stream().filter(line -> !line.startsWith("#")))
                    .as("the events: the allocation and free of 64 bytes, nothing from a name").hasSize(2)
                    .allSatisfy(line -> assertThat(line).doesNotContain("1099511627776"));
        }
    }
}
