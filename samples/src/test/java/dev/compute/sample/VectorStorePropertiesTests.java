package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.unit.DataSize;

/** The stored vectors' limits: defaults, and a bad value refused at start as the starter's settings are. */
class VectorStorePropertiesTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner().withUserConfiguration(Limits.class);

    @Test
    void unsetTheyAreAThousandVectorsAnd256MB() {
        runner.run(context -> assertThat(context.getBean(VectorStoreProperties.class))
                .isEqualTo(new VectorStoreProperties(1000, DataSize.ofMegabytes(256))));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "sample.vectors.max-count=0    | sample.vectors.max-count | 0   | a number of vectors of 1 or more",
            "sample.vectors.max-count=-1   | sample.vectors.max-count | -1  | a number of vectors of 1 or more",
            "sample.vectors.max-bytes=4B   | sample.vectors.max-bytes | 4B  | a size of at least 8B (one element)",
            "sample.vectors.max-bytes=-1MB | sample.vectors.max-bytes | -1048576B | a size of at least 8B (one element)",
    })
    void anInvalidValueStopsStartUpWithTheStartersReport(String setting, String property, String value, String allowed) {
        runner.withPropertyValues(setting).run(context -> {
            assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class);
            FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(null).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).startsWith("A setting is invalid:").contains("Property: " + property)
                    .contains("Value: \"" + value + "\"").contains("Allowed: " + allowed);
        });
    }

    @Configuration(proxyBeanMethods = false)
    @EnableConfigurationProperties(VectorStoreProperties.class)
    static class Limits {}
}
