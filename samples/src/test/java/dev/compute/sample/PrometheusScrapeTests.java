package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Value;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** A real Prometheus scrapes the running sample; its query API returns our series and runs the Grafana dashboard's queries. */
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
                    .contains("\"location\":\"host\"").contains("\"name\":\"default\"").contains("\"backend\":").contains("\"device\":\"0\"");
            assertThat(prometheus.queryUntil("compute_memory_pool_misses_total", body -> body.contains("\"location\""), Duration.ofSeconds(5)))
                    .contains("\"__name__\":\"compute_memory_pool_misses_total\"");
            assertThat(prometheus.queryUntil("up{job=\"compute-sample\"}", body -> body.contains("\"1\"]"), Duration.ofSeconds(5)))
                    .as("the scrape of the sample succeeds").contains("\"1\"]");

            // Every query of the shipped Grafana dashboard parses and runs against our series.
            JsonNode dashboard = JsonMapper.builder().build().readTree(Files.readString(Path.of("grafana/compute-memory-dashboard.json")));
            List<String> expressions = new ArrayList<>();
            dashboard.get("panels").forEach(panel -> panel.get("targets").forEach(target -> expressions.add(target.get("expr").asString())));
            assertThat(expressions).hasSizeGreaterThan(10);
            for (String expression : expressions) {
                String promql = expression.replace("$job", ".*").replace("$backend", ".*").replace("$location", ".*");
                assertThat(prometheus.queryUntil(promql, body -> body.contains("\"status\":\"success\""), Duration.ofSeconds(5)))
                        .as(promql).contains("\"status\":\"success\"");
            }
        }
    }
}
