package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
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
        assertThatThrownBy(() -> parse("a,1,-5,0\n")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("line 1")
                .hasMessageContaining("positive");
        assertThatThrownBy(() -> parse("a,1,100\n")).hasMessageContaining("a,<id>,<bytes>,<stream>");
        assertThatThrownBy(() -> parse("x,1\n")).hasMessageContaining("starts with a or f");
        assertThatThrownBy(() -> parse("f\n")).hasMessageContaining("an event is");
        assertThatThrownBy(() -> parse("a,1,100,0\na,1,100,0\n")).hasMessageContaining("line 2").hasMessageContaining("live already");
        assertThatThrownBy(() -> parse("a,1,100,0,HOST,7,-3\n")).hasMessageContaining("nanos");
        assertThatThrownBy(() -> parse("a,1,100,0\nf,1,7,12,extra\n")).hasMessageContaining("a free is f,<id>[,<thread>,<nanos>]");
    }

    /**
     * A file that is not a trace (binary junk, a dump with no line ends) is refused on its first line; the message quotes
     * the start of that line, not all of it: a megabyte of junk is no one-line error.
     */
    @Test
    void aMalformedLineIsQuotedShortened() {
        String junk = "\u0001\u0002junk".repeat(200_000);

        assertThatThrownBy(() -> parse(junk)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("test line 1 (\u0001\u0002junk")
                .hasMessageContaining("an event is").satisfies(e -> assertThat(e.getMessage()).hasSizeLessThan(400));
        assertThatThrownBy(() -> parse("a,1," + "9".repeat(100_000) + ",0\n")).hasMessageContaining("bytes must be a positive number")
                .satisfies(e -> assertThat(e.getMessage()).hasSizeLessThan(400));
    }

    /**
     * The location column names a {@code MemoryLocation}: a name that is none is refused on its line, not replayed as a
     * location of its own, and a lower-case one is the location it names (a PINNED trace is capped by max-pinned-size).
     */
    @Test
    void aLocationIsAMemoryLocationName() throws IOException {
        assertThatThrownBy(() -> parse("a,1,100,0,GPU0\n")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("test line 1 (a,1,100,0,GPU0)").hasMessageContaining("location");
        assertThat(parse("a,1,100,0,pinned\nf,1\n").locations()).containsExactly("PINNED");
        assertThat(parse("a,1,100,0,,7\n").locations()).as("an empty column: unknown").isEmpty();
    }

    @Test
    void aFreeOfAnIdThatIsNotLiveIsSkippedAndCountedOrRefusedWhenStrict() throws IOException {
        Trace lenient = parse("a,1,100,0\nf,2\nf,1\nf,1\n");

        assertThat(lenient.events()).isEqualTo(2);
        assertThat(lenient.skippedFrees()).isEqualTo(2);
        assertThatThrownBy(() -> Trace.read("strict", new ByteArrayInputStream("a,1,100,0\nf,2\n".getBytes(StandardCharsets.UTF_8)), true))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("strict line 2 (f,2)").hasMessageContaining("not live")
                .hasMessageContaining("without --strict");
    }

    @Test
    void theOptionalColumnsAreKeptAndTheFourColumnFormStillReads() throws IOException {
        Trace trace = parse("""
                # thread,31,http-nio-8080-exec-1
                a,1,1000,0,DEVICE,31,100
                a,2,500,0,PINNED,32,200,com.example.Scorer.score(Scorer.java:12);com.example.Api.post(Api.java:30, with a comma)
                a,3,4000,7
                f,1,32,300
                f,3
                f,2,,
                """);

        assertThat(trace.events()).isEqualTo(6);
        Trace.Columns columns = trace.columns();
        assertThat(columns.lines()).containsExactly(2, 3, 4, 5, 6, 7);
        assertThat(columns.ids()).containsExactly("1", "2", "3", "1", "3", "2");
        assertThat(columns.nanos()).containsExactly(100, 200, -1, 300, -1, -1);
        assertThat(trace.locations()).containsExactly("DEVICE", "PINNED");
        assertThat(columns.streamNames()).containsExactly("0", "7");
        assertThat(columns.threadNames()).containsExactly("31", "32", "");
        assertThat(columns.threadLabel("31")).isEqualTo("31 (http-nio-8080-exec-1)");
        assertThat(trace.hasTimes()).isTrue();
        assertThat(trace.describe(3)).isEqualTo("test line 5, event 4 (free of id 1, stream 0, thread 32)");
        assertThat(trace.describe(0)).isEqualTo("test line 2, event 1 (allocation of 1000 bytes, id 1, stream 0, thread 31 (http-nio-8080-exec-1))");
    }

    @Test
    void streamAndThreadPeaksCountWhatEachAllocatedWhoeverFreedIt() throws IOException {
        Trace trace = parse("""
                a,1,1000,0,DEVICE,1,0
                a,2,3000,5,DEVICE,2,1
                f,1,2,2
                a,3,200,0,DEVICE,2,3
                f,2,1,4
                a,4,700,0,DEVICE,1,5
                """);

        assertThat(trace.livePeakByStream()).containsExactly(entry("0", 1000L), entry("5", 3000L));
        assertThat(trace.livePeakByThread()).containsExactly(entry("1", 1000L), entry("2", 3200L));
    }

    @Test
    void aLocationAloneKeepsItsOwnEventsAndLivePeak() throws IOException {
        Trace trace = parse("a,1,1000,0,DEVICE\na,2,50,0,PINNED\na,3,2000,0,DEVICE\nf,2\nf,1\na,4,60,0,PINNED\n");

        Trace device = trace.only("DEVICE");
        Trace pinned = trace.only("PINNED");

        assertThat(trace.livePeak()).isEqualTo(3050);
        assertThat(device.events()).isEqualTo(3);
        assertThat(device.livePeak()).isEqualTo(3000);
        assertThat(device.locations()).containsExactly("DEVICE");
        assertThat(pinned.bytes()).containsExactly(50, 0, 60);
        assertThat(pinned.livePeak()).isEqualTo(60);
        assertThat(pinned.columns().lines()).containsExactly(2, 4, 6);
    }

    @Test
    void theReplayLineHasEveryFigureInItsFormat() {
        ReplayResult result = new ReplayResult("t.csv.gz", "", 69272, 7_304_230_788L, 7_426_015_232L, 7_345_142_748L, 165, 140, 23, 5_257_725.4,
                0, 0, Map.of("0", 7_304_230_788L), Map.of("", 7_304_230_788L));

        assertThat(result.line()).isEqualTo("replay trace=t.csv.gz events=69272 live_peak=7304230788 reserved_peak=7426015232"
                + " overhead=1.017 min_capacity=7345142748 capacity_ratio=1.006 backend_calls=165 maps=140 unmaps=23 ops_per_s=5257725 skipped_frees=0 trims=0");
        assertThat(result.table()).contains("overhead").contains("1.017").contains("7,345,142,748")
                .contains("live peak by stream").doesNotContain("live peak by thread");
        ReplayResult located = new ReplayResult("r.csv", "DEVICE", 10, 100, 200, 150, 2, 1, 0, 1e6, 3, 1, Map.of("0", 100L),
                Map.of("1 (main)", 100L));
        assertThat(located.line()).startsWith("replay trace=r.csv location=DEVICE events=10 ").endsWith("skipped_frees=3 trims=1");
        assertThat(located.table()).contains("live peak by thread").contains("1 (main)");
    }
}
