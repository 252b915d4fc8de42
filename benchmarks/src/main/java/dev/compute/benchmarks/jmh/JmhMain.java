package dev.compute.benchmarks.jmh;

import java.io.IOException;

/**
 * Runs the JMH suite: {@code java -cp ... dev.compute.benchmarks.jmh.JmhMain [JMH options] [regex]}. Every JMH
 * option works ({@code -f 1 -wi 2 -i 3 -w 1s -r 1s}, {@code -prof gc}, {@code -p leakDetection=simple},
 * {@code -rf json -rff out.json}); {@code -l} lists the benchmarks, {@code -h} JMH's options. Without a regex it
 * runs every benchmark of this package (the only ones in the jar's {@code META-INF/BenchmarkList}).
 */
public final class JmhMain {

    private JmhMain() {}

    public static void main(String[] args) throws IOException {
        org.openjdk.jmh.Main.main(args);
    }
}
