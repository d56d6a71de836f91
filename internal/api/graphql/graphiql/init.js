// GraphiQL for Hermes' /graphql, served by the node itself (no CDN).
// Headers typed in the headers editor (e.g. an Authorization header) are
// sent with every request and kept in this browser's local storage.
(function () {
  var loc = window.location;
  var url = loc.origin + '/graphql';
  var subscriptionUrl = (loc.protocol === 'https:' ? 'wss://' : 'ws://') + loc.host + '/graphql';
  var fetcher = GraphiQL.createFetcher({ url: url, subscriptionUrl: subscriptionUrl });
  var root = ReactDOM.createRoot(document.getElementById('graphiql'));
  root.render(React.createElement(GraphiQL, {
    fetcher: fetcher,
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: true,
    inputValueDeprecation: true,
  }));
})();
