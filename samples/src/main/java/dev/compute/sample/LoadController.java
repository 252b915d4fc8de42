package dev.compute.sample;

import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Switches the load generator on and off: {@code POST /api/load/start}, {@code POST /api/load/stop}, {@code GET /api/load}.
 * The POSTs take {@code Content-Type: application/json} only (415 otherwise): a page on another site can send a
 * form or plain text without asking, but not JSON, so no other site can start the load in a visitor's browser.
 */
@RestController
public class LoadController {

    private final LoadGenerator generator;

    public LoadController(LoadGenerator generator) {
        this.generator = generator;
    }

    @GetMapping("/api/load")
    public LoadGenerator.Status status() {
        return generator.status();
    }

    @PostMapping(path = "/api/load/start", consumes = MediaType.APPLICATION_JSON_VALUE)
    public LoadGenerator.Status start() {
        generator.start();
        return generator.status();
    }

    @PostMapping(path = "/api/load/stop", consumes = MediaType.APPLICATION_JSON_VALUE)
    public LoadGenerator.Status stop() {
        generator.stop();
        return generator.status();
    }
}
