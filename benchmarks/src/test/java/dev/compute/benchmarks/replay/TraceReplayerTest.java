package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class TraceReplayerTest {

    private static final long MiB = 1L << 20;
    private static final long MINUTE = 60_000_000_000L;

    private static Trace parse(String text) throws IOException {
        return Trace.read("test", new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)));
    }

    /** Replays on fresh address-space devices and keeps them, to read their books after. */
    private static final class Devices {
        final List<AddressSpaceBackend> made = new ArrayList<>();

        TraceReplayer replayer(ReplaySettings settings) {
            return new TraceReplayer(capacity -> {
                AddressSpaceBackend device = new AddressSpaceBackend(capacity);
                made.add(device);
                return device;
            }, true, settings);
        }

        AddressSpaceBackend last() {
            return made.getLast();
        }
    }

    private static ReplaySettings settings(Long maxPoolSize, Long releaseThreshold, Duration trimInterval, boolean expandable) {
        return new ReplaySettings(maxPoolSize, null, releaseThreshold, trimInterval, expandable, true);
    }

    @Test
    void theCapacitySearchFindsTheSmallestDeviceThatFits() throws IOException {
        // three 10 MiB blocks live at once at the peak; 2 MiB pages make 30 MiB exactly enough
        Trace trace = parse("a,1,10485760,0\na,2,10485760,0\nf,1\na,3,10485760,0\na,4,10485760,0\nf,2\nf,3\nf,4\n");
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());

        assertThat(replayer.replay(trace, 30 * MiB).fitted()).isTrue();
        assertThat(replayer.replay(trace, 29 * MiB).fitted()).isFalse();
        assertThat(replayer.smallestCapacity(trace, 64 * MiB, 64 * MiB)).isEqualTo(30 * MiB);
        ReplayResult result = replayer.measure(trace, 64 * MiB, 0, 1);
        assertThat(result.minCapacity()).isEqualTo(30 * MiB);
        assertThat(result.capacityRatio()).isEqualTo(1.0);
        assertThat(result.backendCalls()).isPositive();
    }

    /**
     * Eighteen 3 MiB blocks, every third kept (18 MiB live, holes between), then 40 MiB: a 60 MiB device holds it only
     * once the kept blocks are packed, as the manager's compaction on out-of-memory packs them, in a range or in plain
     * segments.
     */
    @Test
    void compactionOnOutOfMemoryPacksTheLiveBlocksAndTheTraceFitsASmallerDevice() throws IOException {
        StringBuilder csv = new StringBuilder();
        for (int i = 0; i < 18; i++) {
            csv.append("a,").append(i).append(',').append(3 * MiB).append(",0\n");
        }
        for (int i = 0; i < 18; i++) {
            if (i % 3 != 0) {
                csv.append("f,").append(i).append('\n');
            }
        }
        csv.append("a,18,").append(40 * MiB).append(",0\n");
        Trace trace = parse(csv.toString());
        for (boolean expandable : new boolean[] {true, false}) {
            TraceReplayer compacting = new TraceReplayer(AddressSpaceBackend::new, true,
                    new ReplaySettings(null, null, null, Duration.ZERO, expandable, true));
            TraceReplayer notCompacting = new TraceReplayer(AddressSpaceBackend::new, true,
                    new ReplaySettings(null, null, null, Duration.ZERO, expandable, false));

            assertThat(compacting.replay(trace, 60 * MiB).fitted()).as("expandable " + expandable).isTrue();
            assertThat(notCompacting.replay(trace, 60 * MiB).fitted()).as("expandable " + expandable).isFalse();
        }
    }

    @Test
    void aCapTooSmallFailsAtTheEventThatMetItAndNamesIt() throws IOException {
        Trace trace = parse("# two blocks of 10 MiB\na,1,10485760,0\na,2,10485760,0\nf,1\nf,2\n");
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, settings(16 * MiB, null, Duration.ZERO, true));

        TraceReplayer.Run run = replayer.replay(trace, 64 * MiB);

        assertThat(run.fitted()).isFalse();
        assertThat(run.failedEvent()).isEqualTo(1);
        assertThat(run.failure()).contains("max-pool-size");
        assertThatThrownBy(() -> replayer.measure(trace, 64 * MiB, 0, 1)).isInstanceOf(ReplayFailedException.class)
                .hasMessageContaining("test line 3, event 2 (allocation of 10485760 bytes, id 2, stream 0)")
                .hasMessageContaining("capped at " + 16 * MiB + " bytes");
    }

    @Test
    void plainSegmentsMapNoPagesAndExpandableOnesDo() throws IOException {
        Trace trace = parse("a,1,10485760,0\nf,1\na,2,3000000,0\n");
        Devices devices = new Devices();

        assertThat(devices.replayer(settings(null, null, Duration.ZERO, false)).replay(trace, 64 * MiB).fitted()).isTrue();
        assertThat(devices.last().mapCalls()).isZero();
        assertThat(devices.last().allocateCalls()).isPositive();
        assertThat(devices.replayer(settings(null, null, Duration.ZERO, true)).replay(trace, 64 * MiB).fitted()).isTrue();
        assertThat(devices.last().mapCalls()).isPositive();
    }

    @Test
    void aTimedTraceIsTrimmedEachIntervalKeepingTheReleaseThreshold() throws IOException {
        // 10 MiB freed at once, then nothing for six minutes: the scheduled trim at five gives it back unless the threshold keeps it
        Trace trace = parse("a,1,10485760,0,DEVICE,1,0\nf,1,1,1000\na,2,4096,0,DEVICE,1," + 6 * MINUTE + "\nf,2,1," + (6 * MINUTE + 1) + "\n");
        TraceReplayer.Run trimmedToNothing = replayer(settings(null, 0L, Duration.ofMinutes(5), true)).replay(trace, 64 * MiB);
        TraceReplayer.Run keptByThreshold = replayer(settings(null, 64 * MiB, Duration.ofMinutes(5), true)).replay(trace, 64 * MiB);
        TraceReplayer.Run neverTrimmed = replayer(settings(null, 0L, Duration.ZERO, true)).replay(trace, 64 * MiB);

        assertThat(trimmedToNothing.trims()).isEqualTo(1);
        assertThat(keptByThreshold.trims()).isEqualTo(1);
        assertThat(neverTrimmed.trims()).isZero();
        assertThat(trimmedToNothing.backendCalls()).as("the trim unmapped the pages, and the next allocation mapped some again")
                .isGreaterThan(neverTrimmed.backendCalls());
        assertThat(keptByThreshold.backendCalls()).as("the threshold kept the cache: the trim gave nothing back")
                .isEqualTo(neverTrimmed.backendCalls());
    }

    /** Times at the far end of what the nanos column holds: events at one instant pass one interval, once. */
    @Test
    void eventsAtOneInstantNearTheEndOfTimeAreTrimmedOnce() throws IOException {
        long late = Long.MAX_VALUE - 1;
        Trace trace = parse("a,1,4096,0,DEVICE,1," + late + "\nf,1,1," + late + "\na,2,4096,0,DEVICE,1," + late + "\nf,2,1," + late + "\n");

        TraceReplayer.Run run = replayer(settings(null, 0L, Duration.ofMinutes(5), true)).replay(trace, 64 * MiB);

        assertThat(run.trims()).isEqualTo(1);
    }

    private static TraceReplayer replayer(ReplaySettings settings) {
        return new TraceReplayer(AddressSpaceBackend::new, true, settings);
    }

    @Test
    void aTraceWithoutTimesIsNeverTrimmed() throws IOException {
        Trace trace = parse("a,1,10485760,0\nf,1\na,2,4096,0\n");

        TraceReplayer.Run run = new TraceReplayer(AddressSpaceBackend::new, true, settings(null, 0L, Duration.ofNanos(1), true))
                .replay(trace, 64 * MiB);

        assertThat(run.trims()).isZero();
    }

    @Test
    void aTraceOfPinnedEventsAloneIsCappedByMaxPinnedSize() throws IOException {
        Trace trace = parse("a,1,10485760,0,PINNED\na,2,10485760,0,PINNED\n");
        ReplaySettings settings = new ReplaySettings(64 * MiB, 16 * MiB, null, Duration.ZERO, true, true);

        assertThat(new TraceReplayer(AddressSpaceBackend::new, true, settings).replay(trace, 64 * MiB).fitted()).isFalse();
        assertThat(new TraceReplayer(AddressSpaceBackend::new, true, settings).replay(parse("a,1,10485760,0,DEVICE\na,2,10485760,0,DEVICE\n"),
                64 * MiB).fitted()).isTrue();
    }
}
