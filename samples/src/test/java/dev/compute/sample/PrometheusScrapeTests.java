package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Value;

/** A real Prometheus scrapes the running sample and its query API returns our series. */
@SampleServiceTest
class PrometheusScrapeTests {

    @Value("${local.server.port}")
    int port;

    @Test
    void prometheusScrapesTheSampleAndAnswersWithOurSeries(@TempDir Path workDir) throws Exception {
        try (PrometheusServer prometheus = PrometheusServer.scraping(port, "/actuator/prometheus", workDir)) {
            String reserved = prometheus.queryUntil("compute_memory_reserved_bytes{job=\"compute-sample\"}",
                    body -> body.contains("\"location\""), Duration.ofSeconds(30));

            assertThat(reserved).contains("\"status\":\"success\"").contains("\"__name__\":\"compute_memory_reserved_bytes\"")
                    .contains("\"location\":\"HOST\"").contains("\"backend\":").contains("\"device\":\"0\"");
            assertThat(prometheus.queryUntil("compute_memory_pool_misses_total", body -> body.contains("\"location\""), Duration.ofSeconds(5)))
                    .contains("\"__name__\":\"compute_memory_pool_misses_total\"");
            assertThat(prometheus.queryUntil("up{job=\"compute-sample\"}", body -> body.contains("\"1\"]"), Duration.ofSeconds(5)))
                    .as("the scrape of the sample succeeds").contains("\"1\"]");
        }
    }
}
