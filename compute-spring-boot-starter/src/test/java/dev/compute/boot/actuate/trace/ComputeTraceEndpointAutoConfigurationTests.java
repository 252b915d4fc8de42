package dev.compute.boot.actuate.trace;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** When the {@code computetrace} endpoint appears, and what its settings accept. */
class ComputeTraceEndpointAutoConfigurationTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(
            ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class, ComputeTraceEndpointAutoConfiguration.class,
            EndpointAutoConfiguration.class));

    // the runner converts enums strictly; an application also takes "unrestricted"
    private static final String GRANTED = "management.endpoint.computetrace.access=UNRESTRICTED";
    private static final String EXPOSED = "management.endpoints.web.exposure.include=computetrace";

    @Test
    void theEndpointAppearsOnlyWhenGrantedAndExposed() {
        runner.run(context -> assertThat(context).doesNotHaveBean(ComputeTraceEndpoint.class));
        runner.withPropertyValues(EXPOSED).run(context -> assertThat(context).doesNotHaveBean(ComputeTraceEndpoint.class));
        runner.withPropertyValues(GRANTED).run(context -> assertThat(context).doesNotHaveBean(ComputeTraceEndpoint.class));
        runner.withPropertyValues(GRANTED, EXPOSED).run(context -> assertThat(context).hasSingleBean(ComputeTraceEndpoint.class));
    }

    @Test
    void withoutActuatorThereIsNoEndpoint() {
        new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class,
                        ComputeMemoryStatisticsAutoConfiguration.class, ComputeTraceEndpointAutoConfiguration.class))
                .withPropertyValues(GRANTED, EXPOSED)
                .withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate"))
                .run(context -> assertThat(context).hasSingleBean(UnifiedMemoryManager.class).doesNotHaveBean(ComputeTraceEndpoint.class));
    }

    @Test
    void withTwoManagersOfTheApplicationsAndNoPrimaryARequestMustNameOne() {
        runner.withPropertyValues(GRANTED, EXPOSED).withUserConfiguration(TwoManagers.class).run(context -> {
            ComputeTraceEndpoint endpoint = context.getBean(ComputeTraceEndpoint.class);
            WebEndpointResponse<?> unnamed = endpoint.recording("start", null, null, null);
            assertThat(unnamed.getStatus()).isEqualTo(400);
            assertThat(unnamed.getBody()).asString().contains("Name the compute memory manager");
            assertThat(endpoint.recording("start", "second", null, null).getStatus()).isEqualTo(200);
            assertThat(context.getBean("second", UnifiedMemoryManager.class).isRecording()).isTrue();
            assertThat(endpoint.recording("stop", "second", null, null).getStatus()).isEqualTo(200);
            assertThat(endpoint.trace("second").getBody()).isNotNull();
            assertThat(endpoint.recording("stop", "second", null, null).getStatus()).as("stopped already").isEqualTo(409);
        });
    }

    @Test
    void aMaxEventsOutOfRangeStopsStartUpNamingTheProperty() {
        runner.withPropertyValues("compute.memory.recording.max-events=0").run(context -> assertThat(context).hasFailed()
                .getFailure().rootCause().isInstanceOf(InvalidSettingException.class)
                .hasMessageContaining("compute.memory.recording.max-events"));
        runner.withPropertyValues("compute.memory.recording.call-site-frames=65").run(context -> assertThat(context).hasFailed()
                .getFailure().rootCause().isInstanceOf(InvalidSettingException.class)
                .hasMessageContaining("compute.memory.recording.call-site-frames"));
    }

    @Configuration(proxyBeanMethods = false)
    static class TwoManagers {
        @Bean(destroyMethod = "close")
        UnifiedMemoryManager first() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }

        @Bean(destroyMethod = "close")
        UnifiedMemoryManager second() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }
    }
}
