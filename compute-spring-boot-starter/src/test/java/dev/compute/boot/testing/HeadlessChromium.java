package dev.compute.boot.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;

/**
 * Debian's {@code chromium}, headless, driven through Debian's {@code chromedriver}. Both paths are given to Selenium
 * explicitly, so Selenium Manager never runs and nothing is downloaded ({@code -Dcompute.tests.chromium} and
 * {@code -Dcompute.tests.chromedriver} point elsewhere). Where either is missing the test is skipped with the reason,
 * unless the environment variable {@code CI} is set: there it fails, saying what to install ({@code .ci/run} installs
 * both).
 */
public final class HeadlessChromium {

    private static final String BROWSER_PROPERTY = "compute.tests.chromium";
    private static final String DRIVER_PROPERTY = "compute.tests.chromedriver";

    /**
     * Selenium looks for a DevTools (CDP) binding matching the browser's version and warns when there is none; these
     * tests use WebDriver only, so the warning is noise. Held here so the logger keeps its level.
     */
    private static final List<Logger> QUIET = Stream.of("org.openqa.selenium.devtools.CdpVersionFinder",
            "org.openqa.selenium.chromium.ChromiumDriver").map(Logger::getLogger).peek(l -> l.setLevel(Level.SEVERE)).toList();

    private HeadlessChromium() {}

    /** A fresh browser with its own profile in {@code profile}; the caller quits it. */
    public static ChromeDriver start(Path profile, int width, int height) {
        Path browser = Path.of(System.getProperty(BROWSER_PROPERTY, "/usr/bin/chromium"));
        Path driver = Path.of(System.getProperty(DRIVER_PROPERTY, "/usr/bin/chromedriver"));
        if (!Files.isExecutable(browser) || !Files.isExecutable(driver)) {
            String reason = "the memory map page tests need Chromium and ChromeDriver: " + browser + " or " + driver
                    + " is missing (apt-get install -y chromium chromium-driver, as .ci/run does, or set -D"
                    + BROWSER_PROPERTY + " and -D" + DRIVER_PROPERTY + ")";
            if (System.getenv("CI") != null) {
                fail(reason + "; CI is set, so this test may not skip");
            }
            Assumptions.abort(reason);
        }
        ChromeOptions options = new ChromeOptions();
        options.setBinary(browser.toFile());
        // running as root in a container: no sandbox; and nothing that reaches out to the network by itself
        options.addArguments("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--user-data-dir=" + profile.toAbsolutePath(),
                "--window-size=" + width + "," + height, "--lang=en-US");
        ChromeDriverService service = new ChromeDriverService.Builder()
                .usingDriverExecutable(driver.toFile())
                .usingAnyFreePort()
                .withTimeout(Duration.ofSeconds(30))
                .build();
        return new ChromeDriver(service, options);
    }
}
