package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.boot.testing.HeadlessChromium;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * A manager closed while the application runs is marked so on the page, as the endpoint's {@code closed} and health's
 * DOWN say: the page drew it as an idle manager, its figures 0, nothing telling it apart from one with no work.
 */
@SpringBootTest(classes = MemoryMapPageClosedManagerTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=computememory,computememorymap", "compute.managers.cpu.backend=cpu",
        "compute.managers.batch.backend=cpu", "compute.memory.timeline.interval=0"})
class MemoryMapPageClosedManagerTests {

    @LocalServerPort
    int port;

    @Autowired
    @Qualifier("batch")
    UnifiedMemoryManager batch;

    @Test
    void aClosedManagersSectionSaysItIsClosed(@TempDir Path profile) {
        batch.close();
        ChromeDriver browser = HeadlessChromium.start(profile, 1280, 800);
        try {
            // the page redraws every 2 s: each look reads the titles at once, and looks again where they were replaced
            WebDriverWait wait = new WebDriverWait(browser, Duration.ofSeconds(20), Duration.ofMillis(100));
            wait.ignoring(StaleElementReferenceException.class);
            browser.get("http://127.0.0.1:" + port + "/actuator/computememorymap");

            List<String> tags = wait.until(d -> {
                List<WebElement> sections = d.findElements(By.cssSelector("section.manager"));
                if (sections.size() < 2) {
                    return null;
                }
                return List.of(tagsOf(d.findElement(By.cssSelector("section.manager[data-manager='batch']"))),
                        tagsOf(d.findElement(By.cssSelector("section.manager[data-manager='cpu']"))));
            });

            assertThat(tags.get(0)).as("batch, closed").contains("closed");
            assertThat(tags.get(1)).as("cpu, open").doesNotContain("closed");
        } finally {
            browser.quit();
        }
    }

    private static String tagsOf(WebElement manager) {
        return String.join(" ", manager.findElements(By.cssSelector(".manager-title h2 .tag")).stream().map(WebElement::getText).toList());
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
