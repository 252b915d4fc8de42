package dev.compute.boot.actuate.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.common.docs.KeyName;
import io.micrometer.core.instrument.Meter;
import io.micrometer.prometheusmetrics.PrometheusNamingConvention;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** The README's meter table is rendered from {@link ComputeMeters}, so the names, tags and descriptions are written once. */
class ComputeMetersTests {

    static final String BEGIN = "<!-- the meters, rendered from ComputeMeters by ComputeMetersTests: change them there -->";
    static final String END = "<!-- end of the meters -->";

    private static final List<String> ON_EVERY_METER = List.of("name", "backend", "device");

    @Test
    void theReadmeListsEveryMeterAsComputeMetersDescribesIt() throws Exception {
        String readme = Files.readString(Path.of("README.md"));
        int begin = readme.indexOf(BEGIN);
        int end = readme.indexOf(END);
        assertThat(begin).as("README.md marks the meter table with %s and %s", BEGIN, END).isNotNegative();
        assertThat(end).isGreaterThan(begin);
        String table = table();
        assertThat(readme.substring(begin + BEGIN.length(), end).strip())
                .as("the meter table in README.md; put this between the markers:%n%s", table)
                .isEqualTo(table.strip());
    }

    @Test
    void everyMeterIsTaggedWithItsManagerBackendAndDeviceAndIsNamedOnce() {
        for (ComputeMeters meter : ComputeMeters.values()) {
            assertThat(Arrays.stream(meter.getKeyNames()).map(KeyName::asString)).as(meter.getName()).startsWith("name", "backend", "device");
            assertThat(meter.description()).as(meter.getName()).isNotBlank();
        }
        assertThat(Arrays.stream(ComputeMeters.values()).map(ComputeMeters::getName)).doesNotHaveDuplicates();
    }

    /** The table as the README has it: one row per meter, in the enum's order. */
    static String table() {
        PrometheusNamingConvention prometheus = new PrometheusNamingConvention();
        StringBuilder table = new StringBuilder("| meter (Prometheus) | kind | tags besides `name`, `backend`, `device` | what |\n")
                .append("| --- | --- | --- | --- |\n");
        for (ComputeMeters meter : ComputeMeters.values()) {
            String exported = prometheus.name(meter.getName(), meter.getType(), meter.getBaseUnit())
                    + (meter.getType() == Meter.Type.COUNTER ? "_total" : "");
            String kind = meter.getType().name().toLowerCase(Locale.ROOT) + (meter.getBaseUnit() != null ? ", " + meter.getBaseUnit() : "");
            String tags = Arrays.stream(meter.getKeyNames()).map(KeyName::asString).filter(tag -> !ON_EVERY_METER.contains(tag))
                    .map(tag -> "`" + tag + "`").collect(Collectors.joining(", "));
            table.append("| `").append(meter.getName()).append("` (`").append(exported).append("`) | ").append(kind).append(" | ")
                    .append(tags).append(" | ").append(meter.description()).append(" |\n");
        }
        return table.toString();
    }
}
