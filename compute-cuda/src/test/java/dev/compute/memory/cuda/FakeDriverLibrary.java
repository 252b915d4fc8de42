package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** Builds the stand-in driver ({@code src/test/c/fake-libcuda.c}) with the system's C compiler, or skips the test. */
final class FakeDriverLibrary {
    private FakeDriverLibrary() {}

    private static final Path SOURCE = Path.of("src/test/c/fake-libcuda.c");

    /** Compiles the fake into {@code directory} as {@code fileName}; skips where there is no C compiler or no source. */
    static Path compile(Path directory, String fileName) throws IOException, InterruptedException {
        assumeTrue(Files.isRegularFile(SOURCE), "the fake driver's source is not here: " + SOURCE.toAbsolutePath());
        Path library = directory.resolve(fileName);
        Process cc;
        try {
            cc = new ProcessBuilder("cc", "-shared", "-fPIC", "-Wl,-soname," + fileName, "-o", library.toString(), SOURCE.toString())
                    .redirectErrorStream(true).start();
        } catch (IOException e) {
            assumeTrue(false, "no C compiler (cc) to build the fake driver: " + e.getMessage());
            return library;
        }
        String output = new String(cc.getInputStream().readAllBytes());
        assertThat(cc.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(cc.exitValue()).as("cc: %s", output).isZero();
        return library;
    }
}
