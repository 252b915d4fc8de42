package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.io.File;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An application whose one dependency is the starter reads its {@code application.yml} and logs through Spring
 * Boot's logging, its shutdown included: the starter brings {@code spring-boot-starter} (SnakeYAML, Logback) and
 * SLF4J's {@code System.LoggerFinder}, which carries the manager's {@code System.Logger} records to it. The tests' own class path has all of that through the test
 * dependencies, so the application runs in a JVM of its own on the class path a user gets (written by the build,
 * see the pom), the starter's classes, and a directory holding only the application's class and its YAML.
 */
class StarterAloneTests {

    @Test
    void anApplicationWithOnlyTheStarterReadsItsYamlAndLogsThroughLogbackUntilItsLastLine(@TempDir Path application) throws Exception {
        Path classFile = application.resolve(StarterAloneApplication.class.getName().replace('.', '/') + ".class");
        Files.createDirectories(classFile.getParent());
        Files.copy(resource(StarterAloneApplication.class.getSimpleName() + ".class"), classFile);
        Files.copy(resource("/starter-alone/application.yml"), application.resolve("application.yml"));
        String classPath = Files.readString(Path.of(System.getProperty("starter-alone.class-path-file"))).strip()
                + File.pathSeparator + System.getProperty("starter-alone.classes") + File.pathSeparator + application;

        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(90), classPath, StarterAloneApplication.class.getName());

        assertThat(result.exitCode()).as(result.describe()).isZero();
        // the pattern and the leak detection level come from application.yml; the line is the manager's, through Logback
        assertThat(result.output()).as(result.describe())
                .containsPattern("(?m)^starter-alone INFO dev\\.compute\\.memory\\.UnifiedMemoryManager compute memory 'default' on .*leak detection PARANOID$");
        // written while the context closes, after Boot has taken down its bridge from JUL: still the application's log
        assertThat(result.output()).as(result.describe())
                .containsPattern("(?m)^starter-alone WARN dev\\.compute\\.memory\\.UnifiedMemoryManager UnifiedMemoryManager 'default' closed with 1 buffer\\(s\\) still open;")
                .contains("StarterAloneApplication.main(StarterAloneApplication.java")
                .doesNotContain("java.util.logging", "WARNING:");
    }

    private static Path resource(String name) throws URISyntaxException {
        return Path.of(Objects.requireNonNull(StarterAloneTests.class.getResource(name), name).toURI());
    }
}
