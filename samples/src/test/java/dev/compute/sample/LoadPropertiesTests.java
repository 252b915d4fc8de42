package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

/** The load generator's settings are refused as the starter's are: property, value, what is allowed. */
class LoadPropertiesTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner().withUserConfiguration(Load.class);

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "sample.load.max-live-buffers=0     | sample.load.max-live-buffers | 0     | a number of buffers of 1 or more",
            "sample.load.max-live-buffers=-3    | sample.load.max-live-buffers | -3    | a number of buffers of 1 or more",
            "sample.load.max-buffer-size=512B   | sample.load.max-buffer-size  | 512B  | a size of at least 1KB",
            "sample.load.max-buffer-size=-4MB   | sample.load.max-buffer-size  | -4194304B | a size of at least 1KB",
            "sample.load.pause=-20ms            | sample.load.pause            | PT-0.02S | 0 (no pause) or a positive duration",
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
    @EnableConfigurationProperties(LoadProperties.class)
    static class Load {}
}
