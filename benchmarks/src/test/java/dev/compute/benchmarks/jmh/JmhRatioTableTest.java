package dev.compute.benchmarks.jmh;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class JmhRatioTableTest {

    @TempDir
    Path dir;

    private static final List<String> CSV = List.of(
            "\"Benchmark\",\"Mode\",\"Threads\",\"Samples\",\"Score\",\"Score Error (99.9%)\",\"Unit\",\"Param: allocator\",\"Param: leakDetection\",\"Param: pooling\"",
            "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.sameSize\",\"avgt\",1,5,40.000000,2.000000,\"ns/op\",,disabled,pooled",
            "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.sameSize:gc.alloc.rate.norm\",\"avgt\",1,5,0.000000,0.000000,\"B/op\",,disabled,pooled",
            "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.mixedSizes\",\"avgt\",1,5,300.000000,NaN,\"ns/op\",,disabled,pooled",
            "\"dev.compute.benchmarks.jmh.PeerAllocateFree.sameSize\",\"avgt\",1,5,200.000000,10.000000,\"ns/op\",backend,,",
            "\"dev.compute.benchmarks.jmh.PeerAllocateFree.sameSize\",\"avgt\",1,5,80.000000,5.000000,\"ns/op\",netty-pooled,,",
            "\"dev.compute.benchmarks.jmh.PeerAllocateFree.mixedSizes\",\"avgt\",1,5,100.000000,5.000000,\"ns/op\",netty-pooled,,",
            "\"dev.compute.benchmarks.jmh.PeerAllocateFree.sameSize\",\"avgt\",1,5,50.000000,5.000000,\"ns/op\",netty-adaptive,,",
            "\"dev.compute.benchmarks.jmh.BufferLifetimeCost.allocateClose\",\"avgt\",1,5,60.000000,3.000000,\"ns/op\",,disabled,");

    @Test
    void readsScoresAndSkipsProfilerRowsAndOtherBenchmarks() {
        var scores = JmhRatioTable.scores(CSV);
        assertThat(scores).containsOnlyKeys("manager, pooled, leak detection disabled", JmhRatioTable.RAW, JmhRatioTable.NETTY_POOLED,
                JmhRatioTable.NETTY_ADAPTIVE);
        assertThat(scores.get("manager, pooled, leak detection disabled")).containsOnlyKeys("sameSize", "mixedSizes");
        assertThat(scores.get("manager, pooled, leak detection disabled").get("mixedSizes").error()).isNaN();
    }

    @Test
    void ratiosAgainstTheRawBackendAndNettyOfTheSameShape() {
        String table = JmhRatioTable.render(CSV);
        assertThat(table).contains("| manager, pooled, leak detection disabled | 40.0 ± 2.0 ns (0.20× raw, 0.50× Netty) | 300.0 ± NaN ns (– raw, 3.00× Netty) | – | – |");
        assertThat(table).contains("- goal: at most 100 ns per same-size pair, manager, pooled, leak detection disabled: 40.0 ns, met");
        assertThat(table).contains("- goal: faster than Netty's pooled allocator, manager, pooled, leak detection disabled, sameSize: 40.0 vs 80.0 ns (0.50×), met");
        assertThat(table).contains("- goal: faster than Netty's pooled allocator, manager, pooled, leak detection disabled, mixedSizes: 300.0 vs 100.0 ns (3.00×), NOT met");
    }

    @Test
    void goalsAgainstNettysAdaptiveAllocatorForTheShapesTheRunHas() {
        String table = JmhRatioTable.render(CSV);
        assertThat(table).contains("- goal: faster than Netty's adaptive allocator, manager, pooled, leak detection disabled, sameSize: 40.0 vs 50.0 ns (0.80×), met");
        assertThat(table).doesNotContain("adaptive allocator, manager, pooled, leak detection disabled, mixedSizes");
    }

    @Test
    void thePeersThatAreResourcesOfTheCoreAreNamedByTheirClasses() {
        assertThat(JmhRatioTable.peerName("backend-resource")).startsWith(BackendResource.class.getSimpleName() + " ");
        assertThat(JmhRatioTable.peerName("pool-resource")).startsWith(CachingPoolResource.class.getSimpleName() + " ");
    }

    @Test
    void quotedFieldsKeepTheirCommasAndQuotes() {
        assertThat(JmhRatioTable.fields("\"a,b\",c,\"say \"\"hi\"\"\",")).containsExactly("a,b", "c", "say \"hi\"", "");
    }

    @Test
    void aFileThatIsNotJmhsCsvOfPairsExitsWithOneAndOneLineSayingWhy() throws IOException {
        String header = CSV.getFirst();
        assertNotATable("", "empty.csv: empty");
        assertNotATable("timestamp,action,size\n1,a,3\n", "bad-header.csv: no column Benchmark");
        assertNotATable(header + "\n\"x.ManagerAllocateFree.sameSize\",\"avgt\",1,5,fast,NaN,\"ns/op\",,disabled,pooled\n",
                "bad-score.csv: line 2: the score 'fast' is not a number");
        assertNotATable(header + "\n\"x.ManagerAllocateFree.sameSize\",\"avgt\",1\n", "short-row.csv: line 2 has 3 fields");
        assertNotATable(header + "\n\"x.ManagerAllocateFree.sameSize\",\"avgt\",1,5,0.04,NaN,\"us/op\",,disabled,pooled\n",
                "us-per-op.csv: no allocate+free pairs in ns/op");
        assertNotATable("\"Benchmark\",\"Score\",\"Score Error (99.9%)\",\"Unit\"\n\"x.ManagerAllocateFree.sameSize\",40,1,\"ns/op\"\n",
                "no-params.csv: no column Param: pooling");
    }

    private void assertNotATable(String csv, String why) throws IOException {
        String name = why.substring(0, why.indexOf(':'));
        Path file = Files.writeString(dir.resolve(name), csv);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();

        int status = JmhRatioTable.run(new String[] {file.toString()}, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));

        assertThat(status).as(name).isEqualTo(1);
        assertThat(out.toString(StandardCharsets.UTF_8)).as(name).isEmpty();
        assertThat(err.toString(StandardCharsets.UTF_8)).as(name).startsWith("jmh-table: " + dir.resolve(why)).hasLineCount(1);
    }

    @Test
    void eachRecordingSettingOfARunIsARowOfItsOwn() {
        // -p recording=off,idle,active, as the README shows: three results per shape that must not overwrite each other
        List<String> csv = List.of(
                "\"Benchmark\",\"Mode\",\"Threads\",\"Samples\",\"Score\",\"Score Error (99.9%)\",\"Unit\",\"Param: leakDetection\",\"Param: pooling\",\"Param: recording\"",
                "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.sameSize\",\"avgt\",1,5,88.0,2.0,\"ns/op\",disabled,pooled,off",
                "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.sameSize\",\"avgt\",1,5,90.0,2.0,\"ns/op\",disabled,pooled,idle",
                "\"dev.compute.benchmarks.jmh.ManagerAllocateFree.sameSize\",\"avgt\",1,5,234.0,27.0,\"ns/op\",disabled,pooled,active");

        var scores = JmhRatioTable.scores(csv);

        assertThat(scores.get("manager, pooled, leak detection disabled").get("sameSize").nanos()).isEqualTo(90.0);
        assertThat(scores.get("manager, pooled, leak detection disabled, recording off").get("sameSize").nanos()).isEqualTo(88.0);
        assertThat(scores.get("manager, pooled, leak detection disabled, recording active").get("sameSize").nanos()).isEqualTo(234.0);
        assertThat(JmhRatioTable.render(csv)).contains("- goal: at most 100 ns per same-size pair, manager, pooled, leak detection disabled: 90.0 ns, met");
    }
}
