package dev.compute.boot;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.ref.WeakReference;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Run by {@link StarterLifecycleTests} in a JVM of its own that clears soft references at every collection: starts and
 * closes web applications with every part of the starter in use (two named managers with budgets, the endpoints over
 * HTTP, a recording, the Prometheus scrape, a buffer left open for the shutdown report), then prints what of the closed
 * ones is still reachable and exits 1 if anything is.
 */
public final class ClosedContextsScenario {

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    static class App {}

    private static final int CONTEXTS = 5;

    private static final String[] PROPERTIES = {"server.port=0", "spring.main.banner-mode=off",
            "compute.managers.main.backend=cpu", "compute.managers.second.backend=cpu", "compute.primary=main",
            "compute.managers.main.budgets.tenant.limit=8MB", "compute.managers.second.budgets.tenant.limit=4MB",
            "compute.memory.timeline.interval=10ms",
            "management.endpoints.web.exposure.include=health,prometheus,computememory,computetrace",
            "management.endpoint.computememory.access=unrestricted", "management.endpoint.computetrace.access=unrestricted"};

    private ClosedContextsScenario() {}

    public static void main(String[] args) throws Exception {
        Map<String, WeakReference<Object>> closed = new LinkedHashMap<>();
        for (int i = 1; i <= CONTEXTS; i++) {
            try (ConfigurableApplicationContext context = new SpringApplicationBuilder(App.class).properties(PROPERTIES).run()) {
                use(context);
                // Boot's logging system keeps the last context's Environment, which reaches that context through
                // Tomcat's ServletContext property source, until the next context starts: the last one is not counted
                if (i < CONTEXTS) {
                    String ofContext = " of context " + i;
                    closed.put("context " + i, new WeakReference<>(context));
                    context.getBeansOfType(UnifiedMemoryManager.class)
                            .forEach((name, manager) -> closed.put(name + ofContext, new WeakReference<>(manager)));
                    context.getBean(ComputeBudgets.class).all().forEach(budget -> closed.put(
                            "budget " + budget.manager() + "/" + budget.name() + ofContext, new WeakReference<>(budget.budget())));
                }
            }
        }
        List<String> reachable = new ArrayList<>(closed.keySet());
        for (long deadline = System.nanoTime() + 10_000_000_000L; !reachable.isEmpty() && System.nanoTime() < deadline; ) {
            System.gc();
            Thread.sleep(50);
            reachable.removeIf(name -> closed.get(name).get() == null);
        }
        System.out.println(closed.size() + " objects of " + (CONTEXTS - 1) + " closed contexts, still reachable: " + reachable);
        System.exit(reachable.isEmpty() ? 0 : 1);
    }

    private static void use(ConfigurableApplicationContext context) throws Exception {
        String base = "http://localhost:" + context.getEnvironment().getRequiredProperty("local.server.port");
        UnifiedMemoryManager main = context.getBean("mainUnifiedMemoryManager", UnifiedMemoryManager.class);
        UnifiedMemoryManager second = context.getBean("secondUnifiedMemoryManager", UnifiedMemoryManager.class);
        try (HttpClient http = HttpClient.newHttpClient()) {
            send(http, "POST", base + "/actuator/computetrace/start?name=main");
            try (UnifiedBuffer buffer = main.allocate(4096, MemoryLocation.HOST);
                 UnifiedBuffer inBudget = context.getBean(ComputeBudgets.class).budget("second", "tenant").orElseThrow()
                         .allocate(1 << 20, MemoryLocation.HOST)) {
                buffer.copyFrom(new byte[] {1});
                inBudget.copyFrom(new byte[] {2});
                send(http, "GET", base + "/actuator/prometheus");
                send(http, "GET", base + "/actuator/computememory");
                send(http, "GET", base + "/actuator/computememory/second/host");
            }
            second.allocate(4096, MemoryLocation.HOST); // left open: the shutdown report
            send(http, "POST", base + "/actuator/computememory");
            send(http, "POST", base + "/actuator/computetrace/stop?name=main");
            send(http, "GET", base + "/actuator/computetrace?name=main");
            send(http, "GET", base + "/actuator/health");
        }
    }

    private static void send(HttpClient http, String method, String uri) throws Exception {
        HttpRequest.BodyPublisher body = method.equals("POST") ? HttpRequest.BodyPublishers.ofString("{}") : HttpRequest.BodyPublishers.noBody();
        HttpRequest request = HttpRequest.newBuilder(URI.create(uri)).header("Content-Type", "application/json").method(method, body).build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        if (response.statusCode() != 200) {
            throw new IllegalStateException(method + " " + uri + " answered " + response.statusCode() + ": " + response.body());
        }
    }
}
