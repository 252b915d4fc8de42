package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.UnifiedMemoryManager;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.core.env.Environment;
import org.springframework.http.MediaType;
import org.springframework.web.client.RestClient;

/**
 * The load generator and the service's shutdown. The context stops the generator (its phase is the highest) before
 * the web server's graceful shutdown stops taking requests, so for a moment a {@code POST /api/load/start} still
 * arrives: it must not start the generator again, to run on while the manager closes under it. A lifecycle bean
 * stopped between the two sends that request, over HTTP, at exactly that moment.
 */
class LoadGeneratorShutdownTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Test
    void aStartArrivingWhileTheServiceShutsDownLeavesTheGeneratorStopped() {
        // arguments, not the builder's properties, which are defaults that the sample's application.yml overrides
        ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class, StartDuringShutdown.class)
                .run("--server.port=0", "--sample.load.pause=1ms", "--compute.backend=cpu");
        AtomicReference<Map<String, Object>> answer = context.getBean(StartDuringShutdown.Starter.class).answer;
        LoadGenerator generator = context.getBean(LoadGenerator.class);
        UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);

        context.close();

        assertThat(answer.get()).as("the POST was answered while the server still served").isNotNull()
                .containsEntry("running", false);
        assertThat(generator.isRunning()).isFalse();
        assertThat(manager.isClosed()).isTrue();
    }

    @Configuration(proxyBeanMethods = false)
    static class StartDuringShutdown {

        @Bean
        Starter loadStarterOnStop(Environment environment) {
            return new Starter(environment);
        }

        /** Stopped after the load generator and before the web server's graceful shutdown: POSTs /api/load/start then. */
        static final class Starter implements SmartLifecycle {
            private final Environment environment;
            final AtomicReference<Map<String, Object>> answer = new AtomicReference<>();
            private volatile boolean running;

            Starter(Environment environment) {
                this.environment = environment;
            }

            @Override
            public void start() {
                running = true;
            }

            @Override
            public void stop() {
                running = false;
                RestClient http = RestClient.create("http://127.0.0.1:" + environment.getProperty("local.server.port"));
                answer.set(http.post().uri("/api/load/start").contentType(MediaType.APPLICATION_JSON).retrieve().body(JSON));
            }

            @Override
            public boolean isRunning() {
                return running;
            }

            @Override
            public int getPhase() {
                return SmartLifecycle.DEFAULT_PHASE - 1;
            }
        }
    }
}
