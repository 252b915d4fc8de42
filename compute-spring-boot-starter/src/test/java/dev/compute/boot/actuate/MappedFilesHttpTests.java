package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.web.client.RestClient;

/**
 * The files a manager has mapped ({@link UnifiedMemoryManager#mappedFileStatistics()}) are no pooled memory, so no
 * location's figures show them: the endpoint and the meters show them apart, scraped over real HTTP.
 */
@SpringBootTest(classes = MappedFilesHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=computememory,prometheus", "compute.backend=cpu",
        "compute.memory.mapped-files.max-open=7"})
class MappedFilesHttpTests {

    private static final int FILE_BYTES = 64 * 1024;

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @TempDir
    Path directory;

    @Test
    void aMappedFileIsInTheEndpointAndTheMetersAsTheManagerCountsIt() throws Exception {
        RestClient http = RestClient.create("http://127.0.0.1:" + port);
        Path file = Files.write(directory.resolve("weights.bin"), new byte[FILE_BYTES]);
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)) {
            String figures = "\"mappedFiles\":{\"openMappings\":1,\"mappedBytes\":" + FILE_BYTES + ",\"mappedBytesPeak\":" + FILE_BYTES
                    + ",\"mappings\":1,\"maxOpenMappings\":7}";
            assertThat(http.get().uri("/actuator/computememory/default").retrieve().body(String.class)).contains(figures);
            assertThat(http.get().uri("/actuator/computememory").retrieve().body(String.class)).as("the primary's summary").contains(figures);
            assertThat(http.get().uri("/actuator/prometheus").retrieve().body(String.class))
                    .contains("compute_memory_mapped_files{backend=\"cpu\",device=\"0\",name=\"default\"} 1.0")
                    .contains("compute_memory_mapped_bytes{backend=\"cpu\",device=\"0\",name=\"default\"} " + FILE_BYTES + ".0")
                    .contains("compute_memory_mapped_peak_bytes{backend=\"cpu\",device=\"0\",name=\"default\"} " + FILE_BYTES + ".0")
                    .contains("compute_memory_mappings_total{backend=\"cpu\",device=\"0\",name=\"default\"} 1.0")
                    .contains("compute_memory_mapped_files_max{backend=\"cpu\",device=\"0\",name=\"default\"} 7.0");
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
