package dev.compute.sample;

import static org.assertj.core.api.Assertions.fail;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.Assumptions;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.utility.DockerImageName;

/**
 * A real Prometheus that scrapes the sample every second: in a container when a Docker engine is there,
 * otherwise the {@code prometheus} binary (Debian's package, which {@code ./test} installs where it can). Where
 * neither is there the test is skipped with the reason, unless the environment variable {@code CI} is set: there it
 * fails, saying what to install. {@code -Dcompute.tests.prometheus=skip} skips it anywhere; {@code docker} or
 * {@code binary} forces a way.
 */
final class PrometheusServer implements AutoCloseable {

    static final String MODE_PROPERTY = "compute.tests.prometheus";
    private static final String IMAGE = "prom/prometheus:v3.5.0";
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(30);

    private final URI api;
    private final AutoCloseable process;
    private final HttpClient http = HttpClient.newHttpClient();

    private PrometheusServer(URI api, AutoCloseable process) {
        this.api = api;
        this.process = process;
    }

    /** Starts a Prometheus scraping {@code metricsPath} on this machine's {@code targetPort}. */
    static PrometheusServer scraping(int targetPort, String metricsPath, Path workDir) throws Exception {
        String mode = System.getProperty(MODE_PROPERTY, "auto").trim().toLowerCase(Locale.ROOT);
        if (mode.isEmpty()) {
            mode = "auto";
        }
        switch (mode) {
            case "skip" -> Assumptions.abort("skipped on request: -D" + MODE_PROPERTY + "=skip");
            case "docker" -> {
                return inContainer(targetPort, metricsPath);
            }
            case "binary" -> {
                return fromBinary(findBinary(), targetPort, metricsPath, workDir);
            }
            case "auto" -> {
                if (dockerAvailable()) {
                    return inContainer(targetPort, metricsPath);
                }
                Path binary = findBinary();
                return fromBinary(binary, targetPort, metricsPath, workDir);
            }
            default -> fail("-D" + MODE_PROPERTY + "=" + mode + " is not a mode: use auto, docker, binary or skip");
        }
        throw new IllegalStateException("unreachable");
    }

    private static boolean dockerAvailable() {
        try {
            return DockerClientFactory.instance().isDockerAvailable();
        } catch (RuntimeException | LinkageError e) {
            return false;
        }
    }

    private static Path findBinary() {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            Path candidate = Path.of(dir.isEmpty() ? "." : dir, "prometheus");
            if (Files.isExecutable(candidate)) {
                return candidate;
            }
        }
        Path debian = Path.of("/usr/bin/prometheus");
        if (Files.isExecutable(debian)) {
            return debian;
        }
        String reason = "no Docker engine and no 'prometheus' binary on PATH or at /usr/bin/prometheus: install it "
                + "(apt-get install -y prometheus, or run ./test, which does where it can)";
        if (System.getenv("CI") != null) {
            return fail(reason + "; CI is set, so this test may not skip");
        }
        Assumptions.abort(reason);
        throw new IllegalStateException("unreachable");
    }

    private static String config(String target, String metricsPath) {
        return """
                global:
                  scrape_interval: 1s
                  evaluation_interval: 1s
                scrape_configs:
                  - job_name: compute-sample
                    metrics_path: %s
                    static_configs:
                      - targets: ['%s']
                """.formatted(metricsPath, target);
    }

    private static PrometheusServer fromBinary(Path binary, int targetPort, String metricsPath, Path workDir) throws Exception {
        Path configFile = workDir.resolve("prometheus.yml");
        Files.writeString(configFile, config("127.0.0.1:" + targetPort, metricsPath));
        int port = freePort();
        Process process = new ProcessBuilder(binary.toString(), "--config.file=" + configFile,
                "--storage.tsdb.path=" + workDir.resolve("data"), "--web.listen-address=127.0.0.1:" + port)
                .redirectErrorStream(true).redirectOutput(workDir.resolve("prometheus.log").toFile()).start();
        PrometheusServer server = new PrometheusServer(URI.create("http://127.0.0.1:" + port), () -> {
            process.destroy();
            if (!process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        });
        server.awaitReady(() -> process.isAlive() ? "" : "prometheus exited with " + process.exitValue() + "; its log: "
                + readQuietly(workDir.resolve("prometheus.log")));
        return server;
    }

    private static PrometheusServer inContainer(int targetPort, String metricsPath) {
        org.testcontainers.Testcontainers.exposeHostPorts(targetPort);
        GenericContainer<?> container = new GenericContainer<>(DockerImageName.parse(IMAGE))
                .withCopyToContainer(Transferable.of(config("host.testcontainers.internal:" + targetPort, metricsPath)),
                        "/etc/prometheus/prometheus.yml")
                .withExposedPorts(9090)
                .waitingFor(Wait.forHttp("/-/ready").forPort(9090).withStartupTimeout(READY_TIMEOUT));
        container.start();
        return new PrometheusServer(URI.create("http://" + container.getHost() + ":" + container.getMappedPort(9090)), container::stop);
    }

    private void awaitReady(java.util.function.Supplier<String> deathNote) {
        await("prometheus ready").atMost(READY_TIMEOUT).pollInterval(Duration.ofMillis(200))
                .ignoreExceptionsInstanceOf(IOException.class) // not listening yet
                .until(() -> {
                    String dead = deathNote.get();
                    if (!dead.isEmpty()) {
                        fail(dead);
                    }
                    return get("/-/ready").statusCode() == 200;
                });
    }

    /**
     * Runs an instant query until its JSON answer satisfies {@code accepted} or the wait is over; returns the
     * last answer either way, for the assertion to show.
     */
    String queryUntil(String promql, Predicate<String> accepted, Duration wait) {
        AtomicReference<String> body = new AtomicReference<>("");
        try {
            await().atMost(wait).pollInterval(Duration.ofMillis(500)).until(() -> {
                body.set(get("/api/v1/query?query=" + URLEncoder.encode(promql, StandardCharsets.UTF_8)).body());
                return accepted.test(body.get());
            });
        } catch (ConditionTimeoutException notYet) {
            // the caller's assertion shows the last answer
        }
        return body.get();
    }

    private HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(api.resolve(path)).timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    private static String readQuietly(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            return "(unreadable: " + e + ")";
        }
    }

    @Override
    public void close() throws Exception {
        http.close();
        process.close();
    }
}
