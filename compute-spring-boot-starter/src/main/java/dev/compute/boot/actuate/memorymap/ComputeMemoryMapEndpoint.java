package dev.compute.boot.actuate.memorymap;

import org.springframework.context.annotation.ImportRuntimeHints;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.WebEndpoint;
import org.springframework.core.io.ClassPathResource;
import org.springframework.util.MimeType;

/**
 * {@code /actuator/computememorymap}: the memory map page, an Actuator web endpoint like any other, so
 * {@code management.endpoints.web.exposure.include}, {@code management.endpoint.computememorymap.access}, the
 * management port and a security chain matching {@code EndpointRequest.toAnyEndpoint()} govern it as they govern
 * the {@code computememory} endpoint whose data it draws.
 *
 * <p>The page is three files in this jar ({@value #LOCATION}), served as one document: the style sheet and the script
 * go inline, so the page needs no path of its own below the endpoint's (Actuator maps an endpoint's path exactly,
 * without a trailing slash for relative links to resolve against). It holds no data of its own and loads nothing
 * from the network.
 */
@WebEndpoint(id = "computememorymap", defaultAccess = Access.READ_ONLY)
@ImportRuntimeHints(MemoryMapPageRuntimeHints.class)
public class ComputeMemoryMapEndpoint {

    static final String LOCATION = "META-INF/compute/memory-map/";
    static final String STYLE_LINK = "<link rel=\"stylesheet\" href=\"memory-map.css\">";
    static final String SCRIPT_TAG = "<script src=\"memory-map.js\"></script>";

    private static final MimeType HTML = new MimeType("text", "html", StandardCharsets.UTF_8);

    private final String page = assemble();

    @ReadOperation(produces = "text/html")
    public WebEndpointResponse<String> page() {
        return new WebEndpointResponse<>(page, HTML);
    }

    /** index.html with memory-map.css and memory-map.js in place of the link and the script tag that load them. */
    static String assemble() {
        String index = read("index.html");
        String style = read("memory-map.css");
        String script = read("memory-map.js");
        if (!index.contains(STYLE_LINK) || !index.contains(SCRIPT_TAG)) {
            throw new IllegalStateException(LOCATION + "index.html no longer loads memory-map.css and memory-map.js as " + STYLE_LINK
                    + " and " + SCRIPT_TAG + ": change " + ComputeMemoryMapEndpoint.class.getName() + " with it");
        }
        // the script and the style sheet are ours, but inline a closing tag in them would end them early
        if (script.contains("</script") || style.contains("</style")) {
            throw new IllegalStateException("memory-map.js or memory-map.css contains a closing tag and cannot be inlined");
        }
        return index.replace(STYLE_LINK, "<style>\n" + style + "</style>").replace(SCRIPT_TAG, "<script>\n" + script + "</script>");
    }

    private static String read(String file) {
        try {
            return new ClassPathResource(LOCATION + file, ComputeMemoryMapEndpoint.class.getClassLoader())
                    .getContentAsString(StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("the memory map page's " + file + " is missing from the starter's jar", e);
        }
    }
}
