package dev.compute.sample;

import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/** Switches the load generator on and off: {@code POST /api/load/start}, {@code POST /api/load/stop}, {@code GET /api/load}. */
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

    @PostMapping("/api/load/start")
    public LoadGenerator.Status start() {
        generator.start();
        return generator.status();
    }

    @PostMapping("/api/load/stop")
    public LoadGenerator.Status stop() {
        generator.stop();
        return generator.status();
    }
}
