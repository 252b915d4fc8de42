package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.Environment;

/** {@code compute.memory.mapped-files.max-open}: bound, handed to the manager, and checked where the manager checks it. */
class MappedFilesPropertiesTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class));

    @TempDir
    Path dir;

    @Test
    void unsetTheManagerMapsUpToTheDefault() {
        runner.run(context -> {
            assertThat(context.getBean(ComputeProperties.class).memory().mappedFiles().maxOpen())
                    .isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES);
            assertThat(context.getBean(UnifiedMemoryManager.class).mappedFileStatistics().maxOpenMappings())
                    .isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES);
        });
    }

    @Test
    void theLimitSetReachesTheManager() throws Exception {
        Path file = Files.write(dir.resolve("data.bin"), new byte[] {1, 2, 3, 4});
        runner.withPropertyValues("compute.memory.mapped-files.max-open=1").run(context -> {
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            assertThat(manager.settings().maxOpenMappedFiles()).isOne();
            try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)) {
                assertThat(manager.mappedFileStatistics().openMappings()).isOne();
                byte[] back = new byte[4];
                mapped.copyTo(back);
                assertThat(back).containsExactly(1, 2, 3, 4);
            }
        });
    }

    @Test
    void aNegativeLimitStopsStartUpNamingTheProperty() {
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withPropertyValues("compute.memory.mapped-files.max-open=-1").withInitializer(context -> environment.set(context.getEnvironment()))
                .run(context -> {
                    assertThat(context).hasFailed();
                    assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class);
                    FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
                    assertThat(analysis.getDescription()).contains("Property: compute.memory.mapped-files.max-open")
                            .contains("Allowed: a number of files from 0 (mapping off) up");
                });
    }
}
