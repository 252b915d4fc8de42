package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.config.BeanFactoryPostProcessor;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ApplicationListener;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.event.ContextRefreshedEvent;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * The vector store and the service's shutdown. Without a graceful shutdown, or past its timeout, requests still run
 * while the context destroys its beans: a put that finished after the store had freed its vectors kept its vector, and
 * the manager's close then reported it as a buffer the service left open.
 */
@ExtendWith(OutputCaptureExtension.class)
class VectorStoreShutdownTests {

    private static final ParameterizedTypeReference<Map<String, Object>> JSON = new ParameterizedTypeReference<>() {};

    @Test
    void aPutFinishingBetweenTheStoresDestroyAndTheManagersCloseKeepsNothingSoNoBufferIsReportedOpen(CapturedOutput output) {
        ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class, PutWhileClosing.class)
                .run("--server.port=0", "--compute.backend=cpu", "--compute.memory.leak-detection=paranoid");
        PutWhileClosing late = context.getBean(PutWhileClosing.class);

        context.close();

        assertThat(late.refusal).as("the put after the store's destroy").isInstanceOf(VectorStore.StoreClosedException.class);
        assertThat(output).contains("Tomcat started on port").doesNotContain("still open");
    }

    @Test
    void aPutOverHttpAfterTheStoreClosedIsAnswered503() {
        ConfigurableApplicationContext context = new SpringApplicationBuilder(SampleApplication.class)
                .run("--server.port=0", "--compute.backend=cpu");
        try {
            RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + context.getEnvironment().getProperty("local.server.port"))
                    .defaultStatusHandler(status -> true, (request, response) -> {}).build();
            context.getBean(VectorStore.class).destroy(); // as the context's close does, with the request under way

            ResponseEntity<Map<String, Object>> response = http.put().uri("/api/vectors/late").contentType(MediaType.APPLICATION_JSON)
                    .body("{\"values\": [1, 2, 3]}").retrieve().toEntity(JSON);
            assertThat(response.getStatusCode().value()).isEqualTo(503);
            assertThat(response.getBody()).extractingByKey("detail").asString().contains("the service is shutting down");
            assertThat(http.get().uri("/api/vectors").retrieve().body(String.class)).isEqualTo("[]");
        } finally {
            context.close();
        }
    }

    /**
     * Destroyed after the store and before the manager (the store depends on it, it on the manager), it puts a vector
     * then, as a request thread still in {@code put} does. It finds the store when the context is refreshed, which
     * makes no dependency on it.
     */
    @Configuration(proxyBeanMethods = false)
    static class PutWhileClosing implements DisposableBean, ApplicationListener<ContextRefreshedEvent> {

        private @Nullable VectorStore store;
        volatile @Nullable RuntimeException refusal;

        @Bean
        static BeanFactoryPostProcessor destroyedBetweenTheStoreAndTheManager() {
            return beanFactory -> {
                String self = beanFactory.getBeanNamesForType(PutWhileClosing.class, false, false)[0];
                beanFactory.getBeanDefinition("vectorStore").setDependsOn(self);
                beanFactory.getBeanDefinition(self).setDependsOn("unifiedMemoryManager");
            };
        }

        @Override
        public void onApplicationEvent(ContextRefreshedEvent event) {
            store = event.getApplicationContext().getBean(VectorStore.class);
        }

        @Override
        public void destroy() {
            try {
                store.put("late", new double[] {1, 2, 3});
            } catch (RuntimeException e) {
                refusal = e;
            }
        }
    }
}
