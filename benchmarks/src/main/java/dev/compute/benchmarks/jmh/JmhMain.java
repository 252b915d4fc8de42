package dev.compute.benchmarks.jmh;

import java.io.IOException;

/**
 * Runs the JMH suite: {@code java -jar benchmarks/target/compute-benchmarks.jar jmh [JMH options] [regex]}, or
 * {@code java -cp ... dev.compute.benchmarks.jmh.JmhMain [JMH options] [regex]}. Every JMH
 * option works ({@code -f 1 -wi 2 -i 3 -w 1s -r 1s}, {@code -prof gc}, {@code -p leakDetection=simple},
 * {@code -rf json -rff out.json}); {@code -l} lists the benchmarks, {@code -h} JMH's options. Without a regex it
 * runs every benchmark of this package (the only ones in the jar's {@code META-INF/BenchmarkList}).
 */
public final class JmhMain {

    private JmhMain() {}

    public static void main(String[] args) throws IOException {
        org.openjdk.jmh.Main.main(args);
    }

    /** The {@code jmh} subcommand; JMH itself exits with a non-zero status when its options are wrong or a run fails. */
    public static int run(String[] args) {
        try {
            main(args);
            return 0;
        } catch (IOException e) {
            System.err.println("jmh: " + e.getMessage());
            return 1;
        }
    }
}
