package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.web.client.RestClient;

/**
 * The starter's README: "A budget of your own, made at run time, can join them with budgets.add(manager, budget,
 * requestLimit)", and ComputeBudgets.add: "metered under its name, in health": the endpoint, health and the meters
 * scraped over HTTP all show it, though the registry bound the meters at start-up.
 */
@SpringBootTest(classes = RuntimeBudgetMetersHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=health,computememory,prometheus", "management.endpoint.health.show-details=always",
        "compute.backend=cpu"})
class RuntimeBudgetMetersHttpTests {

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    @Test
    void aBudgetAddedAtRunTimeIsInTheEndpointAndHealthAndAlsoInTheMeters() {
        RestClient http = RestClient.create("http://127.0.0.1:" + port);
        MemoryBudget tenant = manager.budget("late-tenant", 8L << 20);
        budgets.add("default", tenant, 1L << 20);
        try (UnifiedBuffer held = tenant.allocate(4096, MemoryLocation.HOST)) {
            assertThat(http.get().uri("/actuator/computememory/default").retrieve().body(String.class))
                    .contains("\"name\":\"late-tenant\",\"configured\":true");
            assertThat(http.get().uri("/actuator/health/compute").retrieve().body(String.class)).contains("late-tenant");
            assertThat(http.get().uri("/actuator/prometheus").retrieve().body(String.class))
                    .as("the meters of a budget joined at run time, as ComputeBudgets.add promises")
                    .contains("compute_memory_budget_allocated_bytes{backend=\"cpu\",budget=\"late-tenant\"");
        } finally {
            tenant.close();
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
