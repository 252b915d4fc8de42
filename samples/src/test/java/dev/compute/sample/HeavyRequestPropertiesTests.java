package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

/** The bound on requests carrying vectors: defaults, and a bad value refused at start as the starter's settings are. */
class HeavyRequestPropertiesTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner().withUserConfiguration(Bound.class);

    @Test
    void unsetItIsFourAtOnceWaiting100msAndRetryAfterASecond() {
        runner.run(context -> assertThat(context.getBean(HeavyRequestProperties.class))
                .isEqualTo(new HeavyRequestProperties(4, Duration.ofMillis(100), Duration.ofSeconds(1))));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "sample.heavy-requests.max-concurrent=0   | sample.heavy-requests.max-concurrent | 0      | a number of requests of 1 or more",
            "sample.heavy-requests.max-wait=-1ms      | sample.heavy-requests.max-wait       | PT-0.001S | a duration of 0 or more",
            "sample.heavy-requests.retry-after=500ms  | sample.heavy-requests.retry-after    | PT0.5S | a duration of a second or more",
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
    @EnableConfigurationProperties(HeavyRequestProperties.class)
    static class Bound {}
}
