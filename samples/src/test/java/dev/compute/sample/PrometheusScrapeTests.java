package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.beans.factory.annotation.Value;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** A real Prometheus scrapes the running sample; its query API returns our series and runs the Grafana dashboard's queries. */
@SampleServiceTest
class PrometheusScrapeTests {

    /** A dashboard variable in a query: {@code $name}. */
    private static final Pattern VARIABLE = Pattern.compile("\\$\\w+");

    /** A variable's Grafana query: {@code label_values(metric{selector}, label)}. */
    private static final Pattern LABEL_VALUES = Pattern.compile("label_values\\((.+), (\\w+)\\)");

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

            // Every query of the shipped Grafana dashboard runs against our series and finds some: each panel's, with
            // every variable at "all", and each variable's label_values(metric{...}, label) as a count by that label.
            JsonNode dashboard = JsonMapper.builder().build().readTree(Files.readString(Path.of("grafana/compute-memory-dashboard.json")));
            List<String> expressions = new ArrayList<>();
            dashboard.get("panels").forEach(panel -> panel.get("targets").forEach(target -> expressions.add(target.get("expr").asString())));
            assertThat(expressions).hasSizeGreaterThan(20);
            List<String> variables = new ArrayList<>();
            dashboard.get("templating").get("list").forEach(variable -> {
                if (variable.get("type").asString().equals("query")) {
                    Matcher labelValues = LABEL_VALUES.matcher(variable.get("definition").asString());
                    assertThat(labelValues.matches()).as(variable.toString()).isTrue();
                    expressions.add("count by (" + labelValues.group(2) + ") (" + labelValues.group(1) + ")");
                    variables.add(labelValues.group(2));
                }
            });
            assertThat(variables).as("each panel can be narrowed to one manager of one replica").contains("instance", "name", "location");
            for (String expression : expressions) {
                String promql = VARIABLE.matcher(expression).replaceAll(".*");
                assertThat(prometheus.queryUntil(promql, body -> body.contains("\"result\":[{"), Duration.ofSeconds(10)))
                        .as(promql).contains("\"status\":\"success\"").contains("\"result\":[{");
            }
        }
    }
}
