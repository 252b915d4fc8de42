package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TraceTest {

    private static final long MiB = 1L << 20;

    private static Trace parse(String text) throws IOException {
        return Trace.read("test", new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void parsesEventsSkipsCommentsAndReusesSlots() throws IOException {
        Trace trace = parse("""
                # workload=test
                a,10,1000,0
                a,11,3000,0

                f,10
                a,12,500,0
                # a comment between events
                f,11
                f,12
                a,13,7000,0
                """);

        assertThat(trace.events()).isEqualTo(7);
        assertThat(trace.bytes()).containsExactly(1000, 3000, 0, 500, 0, 0, 7000);
        assertThat(trace.slots()).containsExactly(0, 1, 0, 0, 1, 0, 0);
        assertThat(trace.slotCount()).isEqualTo(2);
        assertThat(trace.livePeak()).as("7000 alone beats 1000+3000 and 3000+500").isEqualTo(7000);
        assertThat(trace.isAllocation(0)).isTrue();
        assertThat(trace.isAllocation(2)).isFalse();
    }

    @Test
    void readsGzipFilesByName(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("small.csv.gz");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (GZIPOutputStream gzip = new GZIPOutputStream(bytes)) {
            gzip.write("a,1,4096,0\na,2,4096,0\nf,1\n".getBytes(StandardCharsets.UTF_8));
        }
        Files.write(file, bytes.toByteArray());

        Trace trace = Trace.read(file);

        assertThat(trace.name()).isEqualTo("small.csv.gz");
        assertThat(trace.events()).isEqualTo(3);
        assertThat(trace.livePeak()).isEqualTo(8192);
    }

    @Test
    void malformedLinesAreRefusedWithTheirLineNumber() {
        assertThatThrownBy(() -> parse("a,1,100,0\nf,2\n")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("line 2").hasMessageContaining("not live");
        assertThatThrownBy(() -> parse("a,1,-5,0\n")).hasMessageContaining("positive");
        assertThatThrownBy(() -> parse("a,1,100\n")).hasMessageContaining("a,<id>,<bytes>,<stream>");
        assertThatThrownBy(() -> parse("x,1\n")).hasMessageContaining("starts with a or f");
        assertThatThrownBy(() -> parse("a,1,100,0\na,1,100,0\n")).hasMessageContaining("live already");
    }

    @Test
    void theReplayLineHasEveryFigureInItsFormat() {
        ReplayResult result = new ReplayResult("t.csv.gz", 69272, 7_304_230_788L, 7_426_015_232L, 7_345_142_748L, 165, 5_257_725.4);

        assertThat(result.line()).isEqualTo("replay trace=t.csv.gz events=69272 live_peak=7304230788 reserved_peak=7426015232"
                + " overhead=1.017 min_capacity=7345142748 capacity_ratio=1.006 backend_calls=165 ops_per_s=5257725");
        assertThat(result.table()).contains("overhead").contains("1.017").contains("7,345,142,748");
    }

    @Test
    void theCapacitySearchFindsTheSmallestDeviceThatFits() throws IOException {
        // three 10 MiB blocks live at once at the peak; 2 MiB pages make 30 MiB exactly enough
        Trace trace = parse("a,1,10485760,0\na,2,10485760,0\nf,1\na,3,10485760,0\na,4,10485760,0\nf,2\nf,3\nf,4\n");
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true);

        assertThat(replayer.replay(trace, 30 * MiB).fitted()).isTrue();
        assertThat(replayer.replay(trace, 29 * MiB).fitted()).isFalse();
        assertThat(replayer.smallestCapacity(trace, 64 * MiB, 64 * MiB)).isEqualTo(30 * MiB);
        ReplayResult result = replayer.measure(trace, 64 * MiB, 0, 1);
        assertThat(result.minCapacity()).isEqualTo(30 * MiB);
        assertThat(result.capacityRatio()).isEqualTo(1.0);
        assertThat(result.backendCalls()).isPositive();
    }

    @Test
    void sizesTakeBinarySuffixes() {
        assertThat(ReplayCommand.parseBytes("80g")).isEqualTo(80L << 30);
        assertThat(ReplayCommand.parseBytes("512M")).isEqualTo(512L << 20);
        assertThat(ReplayCommand.parseBytes("4096")).isEqualTo(4096);
        assertThatThrownBy(() -> ReplayCommand.parseBytes("-1g")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> ReplayCommand.parseBytes("lots")).isInstanceOf(IllegalArgumentException.class);
    }

}
