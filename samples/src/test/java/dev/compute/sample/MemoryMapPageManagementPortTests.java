package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.RestClient;

/**
 * The memory map page with Actuator on a port of its own and the {@code computememory} endpoint not exposed: the page,
 * an endpoint itself, is served on the management port (beside the endpoints, so it would fetch them from its own
 * origin), not on the application's, and in the browser it says plainly that the endpoint is not exposed and how to
 * expose it.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "management.endpoints.web.exposure.include=health,computememorymap"})
class MemoryMapPageManagementPortTests {

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Test
    void thePageIsServedOnTheManagementPortOnly() {
        RestClient http = RestClient.builder().defaultStatusHandler(status -> true, (request, response) -> {}).build();
        ResponseEntity<String> page = http.get().uri("http://127.0.0.1:" + managementPort + "/actuator/computememorymap")
                .retrieve().toEntity(String.class);
        assertThat(page.getStatusCode().value()).isEqualTo(200);
        assertThat(page.getHeaders().getContentType()).hasToString("text/html;charset=UTF-8");
        assertThat(page.getBody()).contains("<title>Compute memory map</title>").contains("computememory");

        assertThat(http.get().uri("http://127.0.0.1:" + port + "/actuator/computememorymap").retrieve().toBodilessEntity()
                .getStatusCode().value()).as("not on the application's port").isEqualTo(404);
    }

    @Test
    void withTheEndpointNotExposedThePageSaysSo(@TempDir Path profile) {
        ChromeDriver browser = HeadlessChromium.start(profile, 1280, 800);
        try {
            browser.get("http://127.0.0.1:" + managementPort + "/actuator/computememorymap");
            WebElement message = new WebDriverWait(browser, Duration.ofSeconds(20))
                    .until(d -> d.findElement(By.id("message")).isDisplayed() ? d.findElement(By.id("message")) : null);
            assertThat(message.getText()).contains("computememory endpoint is not exposed over HTTP")
                    .contains("management.endpoints.web.exposure.include=health,computememory");
            assertThat(browser.findElements(By.cssSelector("section.location"))).isEmpty();
            assertThat(browser.findElement(By.id("trim")).isDisplayed()).isFalse();
        } finally {
            browser.quit();
        }
    }
}
