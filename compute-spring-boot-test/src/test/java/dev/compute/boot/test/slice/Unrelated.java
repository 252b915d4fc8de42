package dev.compute.boot.test.slice;

import org.springframework.stereotype.Component;

/** One of the application's components that has nothing to do with compute memory: no slice test includes it. */
@Component
class Unrelated {}
