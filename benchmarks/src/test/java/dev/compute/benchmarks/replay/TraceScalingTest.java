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
import java.util.zip.GZIPInputStream;
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
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("NoSuchFileException", "missing.csv");
        assertThatThrownBy(() -> scale("a,1,many,0\n", 0.5)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("t.csv line 1 (a,1,many,0): bytes must be a number");
    }
}
