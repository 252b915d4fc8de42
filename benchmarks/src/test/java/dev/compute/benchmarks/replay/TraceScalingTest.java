package dev.compute.benchmarks.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TraceScalingTest {

    @TempDir
    Path dir;

    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    private static String scale(String trace, double factor) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        TraceScaling.scale("t.csv", new ByteArrayInputStream(trace.getBytes(StandardCharsets.UTF_8)), factor, out);
        return out.toString(StandardCharsets.UTF_8);
    }

    private int run(String... args) {
        return TraceScaling.run(args, new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    @Test
    void sizesAreScaledAndRoundedDownToAtLeastOneByteEverythingElseKept() throws IOException {
        String scaled = scale("# recorded run\na,1,1000,0,DEVICE,7,15,Model.forward\na,2,9,0\nf,1,7,20\n\na,3,4000,1\n", 0.2);

        assertThat(scaled).isEqualTo("# t.csv with every allocation's bytes times 0.2 (rounded down, at least 1)\n"
                + "a,1,200,0,DEVICE,7,15,Model.forward\na,2,1,0\nf,1,7,20\na,3,800,1\n");
    }

    @Test
    void theCommandWritesAGzippedTraceTheReplayerReads() throws IOException {
        Path in = dir.resolve("in.csv");
        Files.writeString(in, "a,1,10485760,0\na,2,3000000,0\nf,1\n");
        Path out = dir.resolve("out.csv.gz");

        assertThat(run(in.toString(), "0.5", out.toString())).isZero();

        try (GZIPInputStream read = new GZIPInputStream(Files.newInputStream(out))) {
            Trace trace = Trace.read("out.csv.gz", read);
            assertThat(trace.bytes()).containsExactly(5242880, 1500000, 0);
            assertThat(trace.livePeak()).isEqualTo(6742880);
        }
    }

    @Test
    void aWrongCommandLineExitsWithTwoAndTheUsage() {
        assertThat(run("in.csv", "0.5")).isEqualTo(2);
        assertThat(run("in.csv", "-1", "out.csv")).isEqualTo(2);
        assertThat(run("in.csv", "half", "out.csv")).isEqualTo(2);
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("FACTOR must be a positive number: -1", "FACTOR must be a number: half",
                TraceScaling.USAGE);
    }

    @Test
    void anUnreadableOrMalformedTraceExitsWithOneNamingWhy() throws IOException {
        assertThat(run(dir.resolve("missing.csv").toString(), "0.5", dir.resolve("out.csv").toString())).isEqualTo(1);
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("missing.csv: no such file").doesNotContain("Exception");
        assertThatThrownBy(() -> scale("a,1,many,0\n", 0.5)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("t.csv line 1 (a,1,many,0): bytes must be a positive number");
    }

    @Test
    void aTraceTheReplayerWouldRefuseIsRefusedNotScaled() throws IOException {
        assertThatThrownBy(() -> scale("a,1,-5,0\n", 2)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("t.csv line 1 (a,1,-5,0): bytes must be a positive number");
        assertThatThrownBy(() -> scale("a,1,0,0\n", 2)).hasMessage("t.csv line 1 (a,1,0,0): bytes must be a positive number");
        assertThatThrownBy(() -> scale("timestamp,action,size\n1,a,3\n", 2)).hasMessageStartingWith("t.csv line 1 (timestamp,action,size): ");
        assertThatThrownBy(() -> scale("a,1,10,0\na,1,20,0\n", 2)).hasMessage("t.csv line 2 (a,1,20,0): id 1 is live already");
        // read as the replayer reads it: blanks around a line are no part of it
        assertThat(scale("  a,1,100,0\nf,1  \n", 2)).endsWith("\na,1,200,0\nf,1\n");

        Path in = Files.writeString(dir.resolve("negative.csv"), "a,1,10,0\na,2,-5,0\n");
        assertThat(run(in.toString(), "2", dir.resolve("out.csv").toString())).isEqualTo(1);
        assertThat(err.toString(StandardCharsets.UTF_8)).isEqualTo("scale-trace failed: negative.csv line 2 (a,2,-5,0): bytes must be a positive number"
                + System.lineSeparator());
    }

    @Test
    void aTraceThatCannotBeReadWholeLeavesTheOutputAsItWas() throws IOException {
        StringBuilder events = new StringBuilder();
        for (int id = 0; id < 20_000; id++) {
            events.append("a,").append(id).append(',').append(1000 + id).append(",0\nf,").append(id).append('\n');
        }
        ByteArrayOutputStream gzipped = new ByteArrayOutputStream();
        try (GZIPOutputStream gzip = new GZIPOutputStream(gzipped)) {
            gzip.write(events.toString().getBytes(StandardCharsets.UTF_8));
        }
        Path in = Files.write(dir.resolve("cut.csv.gz"), Arrays.copyOf(gzipped.toByteArray(), gzipped.size() / 2));
        Path out = Files.writeString(dir.resolve("out.csv"), "a,1,10,0\n");

        assertThat(run(in.toString(), "2", out.toString())).isEqualTo(1);

        assertThat(err.toString(StandardCharsets.UTF_8)).startsWith("scale-trace failed: ").contains("cut.csv.gz line ", " cannot be read: ")
                .hasLineCount(1);
        assertThat(out).hasContent("a,1,10,0");
        try (var files = Files.list(dir)) {
            assertThat(files).containsExactlyInAnyOrder(in, out);
        }
    }

    @Test
    void aTraceScaledOntoItselfIsScaledNotEmptied() throws IOException {
        Path trace = Files.writeString(dir.resolve("t.csv"), "a,1,1000,0\nf,1\n");

        assertThat(run(trace.toString(), "0.5", trace.toString())).isZero();

        assertThat(Trace.read(trace).bytes()).containsExactly(500, 0);
    }

    @Test
    void aSizeScaledPastWhatALongHoldsIsRefusedNotCut() {
        assertThatThrownBy(() -> scale("a,1,10,0\na,2,4096,0\n", 1e16)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("t.csv line 2 (a,2,4096,0): 4096 bytes times 1.0E16 is more than a trace can hold (9223372036854775807 bytes)");
    }
}
