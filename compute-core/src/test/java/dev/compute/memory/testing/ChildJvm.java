package dev.compute.memory.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs a {@code main} of the test class path in a JVM of its own, for tests of what could crash the JVM: a crash
 * there fails the test with the child's output instead of taking the test run down. The child gets the same JDK,
 * class path and native access as the tests, and writes any fatal error log where the result can show it.
 */
public final class ChildJvm {

    /** How the child ended, and everything it printed (standard output and error together). */
    public record Result(int exitCode, String output, boolean crashed) {

        /** A one-line account for assertion messages. */
        public String describe() {
            return "exit code " + exitCode + (crashed ? ", JVM CRASHED" : "") + "; output:\n" + output;
        }
    }

    private ChildJvm() {}

    public static Result run(Duration timeout, Class<?> main, String... args) throws IOException, InterruptedException {
        // surefire runs tests from a manifest-only jar and says the real class path here
        return run(timeout, System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")), main.getName(), args);
    }

    /** As {@link #run(Duration, Class, String...)}, with JVM options of the caller's added. */
    public static Result run(Duration timeout, List<String> options, Class<?> main, String... args)
            throws IOException, InterruptedException {
        return run(timeout, System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")), options, main.getName(),
                args);
    }

    /** Runs the {@code main} of a class on a class path of the caller's choosing instead of the tests' own. */
    public static Result run(Duration timeout, String classPath, String main, String... args) throws IOException, InterruptedException {
        return run(timeout, classPath, List.of(), main, args);
    }

    /** As {@link #run(Duration, Class, String...)}, in a JVM that can debug itself: see {@link Breakpoint}. */
    public static Result runDebuggable(Duration timeout, Class<?> main, String... args) throws IOException, InterruptedException {
        return run(timeout, System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")), debuggable(),
                main.getName(), args);
    }

    /** The options of a JVM that can debug itself ({@link Breakpoint}), for a test that starts one of its own. */
    public static List<String> debuggable() {
        // the agent picks a free port itself (a port picked here and closed could be taken before the child binds it);
        // the child reads it from the agent's properties, which the export lets it reach
        return List.of("-agentlib:jdwp=transport=dt_socket,server=y,suspend=n,quiet=y,address=127.0.0.1:0",
                "--add-exports", "java.base/jdk.internal.vm=ALL-UNNAMED");
    }

    private static Result run(Duration timeout, String classPath, List<String> options, String main, String... args)
            throws IOException, InterruptedException {
        Path directory = Files.createTempDirectory("child-jvm");
        try {
            return runIn(directory, timeout, classPath, options, main, args);
        } finally {
            deleteRecursively(directory);
        }
    }

    private static Result runIn(Path directory, Duration timeout, String classPath, List<String> options, String main, String... args)
            throws IOException, InterruptedException {
        Path log = directory.resolve("output.txt");
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.add("--enable-native-access=ALL-UNNAMED");
        command.add("-Xmx512m");
        command.add("-XX:ErrorFile=" + directory.resolve("hs_err_%p.log"));
        command.addAll(options);
        command.add("-cp");
        command.add(classPath);
        command.add(main);
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        boolean ended = process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (!ended) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        String output = Files.readString(log);
        boolean crashed;
        try (var files = Files.list(directory)) {
            crashed = files.anyMatch(file -> file.getFileName().toString().startsWith("hs_err"));
        }
        if (crashed) {
            try (var files = Files.list(directory)) {
                for (Path file : files.filter(f -> f.getFileName().toString().startsWith("hs_err")).toList()) {
                    output += "\n---- " + file + " (first lines) ----\n" + String.join("\n", Files.readAllLines(file).stream().limit(40).toList());
                }
            }
        }
        if (!ended) {
            output += "\n---- the child did not end within " + timeout + " and was killed ----";
        }
        return new Result(ended ? process.exitValue() : -1, output, crashed || output.contains("A fatal error has been detected"));
    }

    /** The child's output and any fatal error log are in the result; a test run leaves nothing in the temp directory. */
    private static void deleteRecursively(Path directory) throws IOException {
        try (var paths = Files.walk(directory)) {
            for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
    }
}
