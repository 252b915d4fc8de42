package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Each panel of the shipped Grafana dashboard declares the unit its queries give, read from the suffixes Prometheus
 * gives our series ({@code _bytes}, {@code _seconds}, {@code _total}) and what the query does with them. A unit that
 * does not match draws a true figure as a false one: seconds per second drawn as seconds read as a duration a thousand
 * times too short. {@link PrometheusScrapeTests} runs the same queries against a real Prometheus.
 */
class GrafanaDashboardUnitsTests {

    @Test
    void everyPanelDeclaresTheUnitItsQueriesGive() throws Exception {
        JsonNode dashboard = JsonMapper.builder().build().readTree(Files.readString(Path.of("grafana/compute-memory-dashboard.json")));
        List<String> mismatched = new ArrayList<>();
        int queries = 0;
        for (JsonNode panel : dashboard.get("panels")) {
            String declared = panel.get("fieldConfig").get("defaults").get("unit").asString();
            for (JsonNode target : panel.get("targets")) {
                String expression = target.get("expr").asString();
                queries++;
                if (!unitOf(expression).equals(declared)) {
                    mismatched.add("'" + panel.get("title").asString() + "' declares " + declared + ", its query gives " + unitOf(expression)
                            + ": " + expression);
                }
            }
        }
        assertThat(queries).isGreaterThan(20);
        assertThat(mismatched).isEmpty();
    }

    @Test
    void theUnitOfAQueryFollowsItsSeriesAndWhatIsDoneWithThem() {
        assertThat(unitOf("compute_memory_reserved_bytes{location=~\"$location\"}")).isEqualTo("bytes");
        assertThat(unitOf("rate(compute_memory_copied_bytes_total[1m])")).isEqualTo("Bps");
        assertThat(unitOf("rate(compute_memory_backend_allocate_seconds_sum[1m]) / clamp_min(rate(compute_memory_backend_allocate_seconds_count[1m]), 1e-9)"))
                .as("a mean duration").isEqualTo("s");
        assertThat(unitOf("compute_memory_backend_free_seconds_max")).isEqualTo("s");
        assertThat(unitOf("rate(compute_memory_oom_recovery_seconds_sum[5m])")).as("seconds per second").isEqualTo("percentunit");
        assertThat(unitOf("rate(compute_memory_pool_hits_total[1m]) / clamp_min(rate(compute_memory_pool_hits_total[1m]) + "
                + "rate(compute_memory_pool_misses_total[1m]), 1e-9)")).isEqualTo("percentunit");
        assertThat(unitOf("rate(compute_memory_allocations_total[1m])")).isEqualTo("ops");
        assertThat(unitOf("increase(compute_memory_leaks_total[1h])")).as("a count").isEqualTo("none");
        assertThat(unitOf("compute_memory_fragmentation_ratio")).isEqualTo("none");
        assertThat(unitOf("compute_memory_live_buffers")).isEqualTo("none");
    }

    /** Grafana's unit for what {@code expression} gives. */
    private static String unitOf(String expression) {
        boolean perSecond = expression.contains("rate(");
        if (expression.contains("_seconds_sum")) {
            // over the count, the mean duration; alone, seconds spent per second: a share of the time
            return expression.contains("_seconds_count") ? "s" : "percentunit";
        }
        if (expression.contains("_seconds_max")) {
            return "s";
        }
        if (expression.contains("_pool_hits_total") && expression.contains("_pool_misses_total")) {
            return "percentunit";
        }
        if (expression.contains("_bytes")) {
            return perSecond ? "Bps" : "bytes";
        }
        // a rate of events, else a count, a number of buffers or a ratio
        return perSecond ? "ops" : "none";
    }
}
